// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/collectives/communicator.hpp>
#include <cuasync/collectives/detail/clique.hpp>
#include <cuasync/collectives/nccl_error.hpp>
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/device.hpp>

#include <algorithm>
#include <cstring>

namespace cuasync::collectives {

namespace {

// NCCL's CUDA runtime picks the device from the thread's current context and may leave another one current:
// restore the caller's.
class current_context_kept {
 public:
  current_context_kept() { cuasync::detail::driver().cuCtxGetCurrent(&saved_); }
  ~current_context_kept() { cuasync::detail::driver().cuCtxSetCurrent(saved_); }
  current_context_kept(const current_context_kept&) = delete;
  current_context_kept& operator=(const current_context_kept&) = delete;

 private:
  CUcontext saved_ = nullptr;
};

void check_options(const char* api, const communicator_options& o, std::source_location where) {
  if (o.timeout.count() < 0)
    cuasync::detail::throw_invalid(api, "negative timeout " + std::to_string(o.timeout.count()) +
                                            " ms (0 means no limit)",
                                   where);
}

detail::clique_member member_for(int device, int rank, std::source_location where) {
  detail::clique_member m;
  m.device = device;
  m.rank = rank;
  m.context = primary_context::retain(device, where);
  m.events = event_pool::for_context(m.context, where);
  return m;
}

}  // namespace

unique_id unique_id::generate(std::source_location where) {
  const detail::nccl_entry_points& n = detail::nccl();
  detail::nccl_unique_id raw{};
  detail::check_nccl(n.get_unique_id(&raw), "ncclGetUniqueId", {}, where);
  unique_id id;
  std::memcpy(id.bytes.data(), raw.internal, sizeof raw.internal);
  return id;
}

std::vector<communicator> communicator::init_all(std::span<const int> devices, communicator_options options,
                                                 std::source_location where) {
  constexpr const char* api = "cuasync::collectives::communicator::init_all";
  if (devices.empty()) cuasync::detail::throw_invalid(api, "no devices", where);
  check_options(api, options, where);
  std::vector<int> sorted(devices.begin(), devices.end());
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    cuasync::detail::throw_invalid(api, "a device is listed twice (one rank per device)", where);
  for (int d : devices) device::get(d, where);  // names a bad ordinal
  const detail::nccl_entry_points& n = detail::nccl();
  auto c = detail::make_clique();
  c->nranks = static_cast<int>(devices.size());
  c->options = options;
  for (std::size_t i = 0; i < devices.size(); ++i) c->members.push_back(member_for(devices[i], static_cast<int>(i), where));
  std::vector<detail::nccl_comm> comms(devices.size());
  detail::default_nvls_off();
  {
    current_context_kept kept;
    detail::check_nccl(n.comm_init_all(comms.data(), c->nranks, devices.data()), "ncclCommInitAll",
                       std::to_string(devices.size()) + " devices", where);
  }
  for (std::size_t i = 0; i < comms.size(); ++i) c->members[i].comm = comms[i];
  std::vector<communicator> out;
  for (int i = 0; i < c->nranks; ++i) out.push_back(communicator(c, i));
  return out;
}

communicator communicator::init_rank(const unique_id& id, int nranks, int rank, int device_ordinal,
                                     communicator_options options, std::source_location where) {
  constexpr const char* api = "cuasync::collectives::communicator::init_rank";
  if (nranks < 1) cuasync::detail::throw_invalid(api, "nranks " + std::to_string(nranks) + " < 1", where);
  if (rank < 0 || rank >= nranks)
    cuasync::detail::throw_invalid(api, "rank " + std::to_string(rank) + " outside [0, " + std::to_string(nranks) + ")",
                                   where);
  if (id == unique_id{}) cuasync::detail::throw_invalid(api, "the unique id is all zeros (never generated)", where);
  check_options(api, options, where);
  device::get(device_ordinal, where);
  const detail::nccl_entry_points& n = detail::nccl();
  auto c = detail::make_clique();
  c->nranks = nranks;
  c->options = options;
  c->members.push_back(member_for(device_ordinal, rank, where));
  detail::nccl_unique_id raw{};
  std::memcpy(raw.internal, id.bytes.data(), sizeof raw.internal);
  detail::default_nvls_off();
  {
    current_context_kept kept;
    scoped_context on(c->members[0].context, where);
    detail::check_nccl(n.comm_init_rank(&c->members[0].comm, nranks, raw, rank), "ncclCommInitRank",
                       "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " on device " +
                           std::to_string(device_ordinal),
                       where);
  }
  return communicator(std::move(c), 0);
}

communicator::~communicator() = default;

int communicator::rank() const noexcept { return clique_ ? clique_->members[index_].rank : -1; }
int communicator::size() const noexcept { return clique_ ? clique_->nranks : 0; }
int communicator::device() const noexcept { return clique_ ? clique_->members[index_].device : -1; }
context_ref communicator::context() const noexcept {
  return clique_ ? context_ref(clique_->members[index_].context) : context_ref();
}
detail::nccl_comm communicator::native() const noexcept { return clique_ ? clique_->members[index_].comm : nullptr; }
std::string communicator::describe() const { return clique_ ? clique_->describe(index_) : "an empty communicator"; }
std::error_code communicator::fault() const noexcept { return clique_ ? clique_->error() : std::error_code(); }
std::string communicator::fault_detail() const { return clique_ ? clique_->detail() : std::string(); }

void communicator::abort(std::error_code why) {
  if (clique_) clique_->fail(why, "aborted by the application on " + describe());
}

}  // namespace cuasync::collectives
