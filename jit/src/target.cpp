// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/jit/target.hpp>
#include <cuasync/log.hpp>

#include <algorithm>
#include <charconv>

namespace cuasync::jit {
namespace {

std::string arch_name(int arch) { return std::to_string(arch / 10) + "." + std::to_string(arch % 10); }

// (driver CUDA version, newest PTX ISA it can JIT), ascending.
struct isa_row {
  int driver;
  ptx_isa isa;
};
constexpr isa_row isa_table[] = {
    {11000, {7, 0}}, {11010, {7, 1}}, {11020, {7, 2}}, {11030, {7, 3}}, {11040, {7, 4}}, {11050, {7, 5}},
    {11060, {7, 6}}, {11070, {7, 7}}, {11080, {7, 8}}, {12000, {8, 0}}, {12010, {8, 1}}, {12020, {8, 2}},
    {12030, {8, 3}}, {12040, {8, 4}}, {12050, {8, 5}}, {12060, {8, 5}}, {12070, {8, 6}}, {12080, {8, 7}},
    {12090, {8, 8}}, {13000, {9, 0}},
};

}  // namespace

const char* to_string(output_kind k) noexcept {
  switch (k) {
    case output_kind::cubin: return "CUBIN";
    case output_kind::ptx: return "PTX";
    case output_kind::ltoir: return "LTO-IR";
  }
  return "?";
}

std::string target::architecture() const {
  return (kind == output_kind::cubin ? "sm_" : "compute_") + std::to_string(arch);
}

std::string target::to_string() const { return std::string(jit::to_string(kind)) + " " + architecture(); }

target select_target(int cc, std::span<const int> supported, output_request request, std::source_location where) {
  constexpr const char* api = "cuasync::jit::select_target";
  if (cc < 10 || cc > 999)
    cuasync::detail::throw_invalid(
        api, "compute capability " + std::to_string(cc) + " is not major * 10 + minor (e.g. 90 for sm_90)", where);
  if (supported.empty()) cuasync::detail::throw_invalid(api, "NVRTC reported no supported architectures", where);
  const bool exact = std::find(supported.begin(), supported.end(), cc) != supported.end();
  if (request == output_request::automatic && exact) return {output_kind::cubin, cc};
  // The highest supported architecture not above the device: its PTX runs on the device (PTX is forward
  // compatible), and an NVRTC older than the GPU never gets an architecture it does not know.
  int best = 0;
  for (int a : supported)
    if (a <= cc && a > best) best = a;
  if (best == 0) {
    const int oldest = *std::min_element(supported.begin(), supported.end());
    throw unsupported_architecture_error(
        make_error_code(NVRTC_ERROR_INVALID_OPTION), api,
        "the device (compute capability " + arch_name(cc) + ", sm_" + std::to_string(cc) +
            ") is older than every architecture this NVRTC supports (the oldest is sm_" + std::to_string(oldest) +
            "): use an NVRTC that still supports it (CUASYNC_LIBNVRTC=/path/to/an older libnvrtc.so)",
        where);
  }
  if (request == output_request::automatic)
    logging::write_with(logging::level::info, [&] {
      return "sm_" + std::to_string(cc) + " is not among the architectures this NVRTC compiles CUBINs for (sm_" +
             std::to_string(*std::min_element(supported.begin(), supported.end())) + " to sm_" +
             std::to_string(*std::max_element(supported.begin(), supported.end())) + "): PTX for compute_" +
             std::to_string(best) + " instead, compiled by the driver when loaded";
    });
  return {request == output_request::ltoir ? output_kind::ltoir : output_kind::ptx, best};
}

target select_target(int cc, output_request request, std::source_location where) {
  return select_target(cc, nvrtc_library().supported_archs, request, where);
}

std::optional<ptx_isa> parse_ptx_isa(std::string_view ptx) noexcept {
  // The directive is near the top, after comments: ".version 9.0"
  for (std::size_t pos = ptx.find(".version"); pos != std::string_view::npos; pos = ptx.find(".version", pos + 1)) {
    if (pos > 0 && ptx[pos - 1] != '\n' && ptx[pos - 1] != ' ' && ptx[pos - 1] != '\t') continue;
    std::size_t i = pos + 8;
    while (i < ptx.size() && (ptx[i] == ' ' || ptx[i] == '\t')) ++i;
    ptx_isa v;
    const char* end = ptx.data() + ptx.size();
    auto [p1, e1] = std::from_chars(ptx.data() + i, end, v.major);
    if (e1 != std::errc{} || p1 == end || *p1 != '.') continue;
    auto [p2, e2] = std::from_chars(p1 + 1, end, v.minor);
    if (e2 != std::errc{} || v.minor > 9) continue;
    return v;
  }
  return std::nullopt;
}

ptx_isa max_ptx_isa_for_driver(int driver_version) noexcept {
  if (driver_version > isa_table[std::size(isa_table) - 1].driver) return {99, 9};  // newer than we know of
  ptx_isa best{6, 0};  // older than CUDA 11: cuasync does not support it anyway
  for (const auto& row : isa_table)
    if (row.driver <= driver_version) best = row.isa;
  return best;
}

std::string driver_version_for_ptx_isa(ptx_isa isa) {
  for (const auto& row : isa_table)
    if (row.isa >= isa) return std::to_string(row.driver / 1000) + "." + std::to_string(row.driver % 1000 / 10);
  return "newer than " + std::to_string(isa_table[std::size(isa_table) - 1].driver / 1000) + ".x";
}

void check_ptx_loadable(std::string_view ptx, int driver_version, std::string_view label, std::source_location where) {
  constexpr const char* api = "cuasync::jit::check_ptx_loadable";
  const auto isa = parse_ptx_isa(ptx);
  if (!isa)
    throw cuda_error(make_error_code(CUDA_ERROR_INVALID_IMAGE), api,
                     "'" + std::string(label) + "' has no .version directive: not PTX", where);
  const ptx_isa max = max_ptx_isa_for_driver(driver_version);
  if (*isa <= max) return;
  const std::string driver = std::to_string(driver_version / 1000) + "." + std::to_string(driver_version % 1000 / 10);
  throw ptx_too_new_error(
      make_error_code(CUDA_ERROR_UNSUPPORTED_PTX_VERSION), api,
      "PTX '" + std::string(label) + "' is PTX ISA " + isa->to_string() + ", but the installed driver (CUDA " +
          driver + ") can JIT PTX ISA " + max.to_string() + " at most. Update the NVIDIA driver to one for CUDA " +
          driver_version_for_ptx_isa(*isa) +
          " or newer, or compile with an NVRTC no newer than the driver (CUASYNC_LIBNVRTC=/path/to/libnvrtc.so.12 "
          "for CUDA " + driver + "), or compile a CUBIN for the device's exact architecture",
      where);
}

}  // namespace cuasync::jit
