// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Compiling without a GPU (ABI 1.2): NVRTC through cuasync's caches for an architecture the caller names, the image
// returned as bytes in an object the caller destroys; and the same without blocking (ABI 1.5: a job whose completion
// goes to a queue like GPU work's). Also the reading of a program from a call's arguments, which compile shares.
#include "calls.hpp"
#include "completion_queue.hpp"
#include "handles.hpp"

#include <cuasync/driver/detail/serial_worker.hpp>
#include <cuasync/jit/compile_farm.hpp>
#include <cuasync/jit/compiler.hpp>

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace cuasync::c_api {

namespace {
struct image_object {
  std::shared_ptr<const jit::compiled_program> program;
  std::string text;  // PTX with its NUL (the program's bytes have none); empty for a CUBIN
  std::string architecture;
  std::vector<std::string> lowered;
  std::vector<const char*> lowered_pointers;
};

bool parse_number(std::string_view s, int& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size() && !s.empty();
}

std::string supported_list(const std::vector<int>& archs) {
  std::string out;
  for (int a : archs) out += (out.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return out.empty() ? "none" : out;
}

// The target `arch` names, refused unless NVRTC supports that architecture exactly (never a quiet substitute).
jit::target target_of(const char* arch, const jit::nvrtc_info& nvrtc) {
  if (!arch || !*arch)
    fail(CUASYNC_ERROR_INVALID_ARGUMENT, "compile_image: arch is " + std::string(arch ? "empty" : "NULL") +
                                             ": name the GPU architecture to compile for (\"sm_90\", \"compute_90\")");
  const std::string_view a(arch);
  jit::target t{jit::output_kind::cubin, 0};
  std::string_view digits = a;
  if (a.starts_with("sm_")) {
    digits = a.substr(3);
  } else if (a.starts_with("compute_")) {
    digits = a.substr(8);
    t.kind = jit::output_kind::ptx;
  }
  if (!parse_number(digits, t.arch) || t.arch < 10)
    fail(CUASYNC_ERROR_INVALID_ARGUMENT, "compile_image: cannot read arch \"" + std::string(a) +
                                             "\": write sm_XY for a CUBIN, compute_XY for PTX, or XY (e.g. sm_90)");
  if (!nvrtc.supports(t.arch))
    fail(CUASYNC_ERROR_UNSUPPORTED, "compile_image: NVRTC " + nvrtc.version_string() + " does not support " +
                                        std::string(a) + "; it supports " + supported_list(nvrtc.supported_archs) +
                                        " (compute_XY for the same numbers): compile for one of them, or use an "
                                        "NVRTC that knows this architecture (CUASYNC_LIBNVRTC)");
  return t;
}
}  // namespace

program_request read_program(const char* call, const char* name, const char* source, const char* const* options,
                             std::size_t num_options, const cuasync_header* headers, std::size_t num_headers,
                             const char* const* name_expressions, std::size_t num_name_expressions) {
  const std::string c(call);
  if (!source) fail(CUASYNC_ERROR_INVALID_ARGUMENT, c + ": source is NULL");
  if ((num_options && !options) || (num_headers && !headers) || (num_name_expressions && !name_expressions))
    fail(CUASYNC_ERROR_INVALID_ARGUMENT, c + ": a count without its array");
  program_request r{jit::program(name ? name : "program", source), {}};
  for (std::size_t i = 0; i < num_headers; ++i) {
    if (!headers[i].name || !headers[i].contents)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, c + ": header " + std::to_string(i) + " has a NULL name or contents");
    r.program.add_header(headers[i].name, headers[i].contents);
  }
  for (std::size_t i = 0; i < num_name_expressions; ++i) {
    if (!name_expressions[i]) fail(CUASYNC_ERROR_INVALID_ARGUMENT, c + ": a NULL name expression");
    r.program.add_name_expression(name_expressions[i]);
  }
  for (std::size_t i = 0; i < num_options; ++i) {
    if (!options[i]) fail(CUASYNC_ERROR_INVALID_ARGUMENT, c + ": a NULL option");
    r.options.extra.emplace_back(options[i]);
  }
  return r;
}

namespace {
// compile_image's out fields for a compile's result, the image object registered.
void set_image_outputs(cuasync_compile_image_args& x, const jit::compile_result& r,
                       const std::vector<std::string>& name_expressions) {
  auto image = std::make_shared<image_object>();
  image->program = r.program;
  image->architecture = r->target.architecture();
  if (r->target.kind == jit::output_kind::ptx) image->text.assign(r->text());
  for (const std::string& e : name_expressions) image->lowered.push_back(r->lowered_name(e));
  for (const std::string& l : image->lowered) image->lowered_pointers.push_back(l.c_str());
  x.data = image->text.empty() ? static_cast<const void*>(r->image.data()) : image->text.c_str();
  x.size = r->image.size();
  x.kind = r->target.kind == jit::output_kind::ptx ? CUASYNC_IMAGE_PTX : CUASYNC_IMAGE_CUBIN;
  x.architecture = image->architecture.c_str();
  x.log = r->log.c_str();
  x.log_size = r->log.size();
  x.lowered_names = image->lowered_pointers.empty() ? nullptr : image->lowered_pointers.data();
  x.image = to_handle<cuasync_image>(registry::instance().add(kind::image, std::move(image)));
}

std::vector<std::string> expressions_of(const cuasync_compile_image_args& x) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < x.num_name_expressions; ++i) out.emplace_back(x.name_expressions[i]);
  return out;
}

// A compile started by compile_image_start: its outcome, kept until compile_image_finish takes it.
struct compile_job_object {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::optional<jit::compile_result> result;
  cuasync_error* error = nullptr;  // owned until finish hands it to the caller
  std::vector<std::string> name_expressions;
  delivery to;

  // Keeps the outcome, then delivers the completion (finish may be waiting already, or come later).
  void complete(jit::compile_result r, std::exception_ptr e) noexcept {
    cuasync_error* made = nullptr;
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (...) {
        made = current_error("compile_image_start");
      }
    }
    const cuasync_error_code code = made ? made->code : CUASYNC_OK;
    {
      std::lock_guard lock(mutex);
      error = made;
      if (!made) result = std::move(r);
      done = true;
    }
    finished.notify_all();
    to(code == CUASYNC_OK ? std::error_code() : std::error_code(code, abi_category()));
  }
  ~compile_job_object() { destroy_error(error); }  // a job dropped unfinished (the library's teardown)
};

// The compile threads of jobs without a farm (NVRTC compiles on the calling thread, so each compile holds one): as
// many as the hardware threads, at most 16 (NVRTC stops scaling at ~2.6x in one process; the farm goes further). Each
// is a cuasync thread that lives for the process and runs what is queued at exit; a job goes to the least busy.
detail::serial_worker& compile_thread() {
  static const std::vector<detail::serial_worker*> threads = [] {
    const unsigned n = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
    std::vector<detail::serial_worker*> v;
    for (unsigned i = 0; i < n; ++i) v.push_back(&detail::serial_worker::make("cuasync-compile"));
    return v;
  }();
  return **std::min_element(threads.begin(), threads.end(), [](const auto* a, const auto* b) {
    return a->posted() - a->ran() < b->posted() - b->ran();
  });
}
}  // namespace

cuasync_error* compile_image(cuasync_compile_image_args* a) noexcept {
  return call("compile_image", a, [](args<cuasync_compile_image_args>& x) {
    program_request req = read_program("compile_image", x->name, x->source, x->options, x->num_options, x->headers,
                                       x->num_headers, x->name_expressions, x->num_name_expressions);
    jit::compiler& compiler = jit::default_compiler();
    const jit::target t = target_of(x->arch, compiler.nvrtc_identity());
    set_image_outputs(*x, compiler.compile(req.program, t, req.options), expressions_of(*x));
  });
}

cuasync_error* compile_image_start(cuasync_compile_image_start_args* a) noexcept {
  return call("compile_image_start", a, [](args<cuasync_compile_image_start_args>& x) {
    if (!x->compile) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "compile_image_start: compile is NULL");
    // The compile's arguments read as compile_image reads them (its struct_size included), on this thread.
    args<cuasync_compile_image_args> c(const_cast<cuasync_compile_image_args*>(x->compile), "compile_image_start");
    program_request req = read_program("compile_image_start", c->name, c->source, c->options, c->num_options,
                                       c->headers, c->num_headers, c->name_expressions, c->num_name_expressions);
    jit::compiler& compiler = jit::default_compiler();
    const jit::target t = target_of(c->arch, compiler.nvrtc_identity());
    auto job = std::make_shared<compile_job_object>();
    job->to = make_delivery(x->completion, "compile_image_start");
    job->name_expressions = expressions_of(*c);
    x->job = to_handle<cuasync_compile_job>(registry::instance().add(kind::compile_job, job));
    auto done = [job](jit::compile_result r, std::exception_ptr e) { job->complete(std::move(r), e); };
    if (compiler.farm()) {
      // A miss is queued in the farm and this returns at once; a hit completes here.
      compiler.compile_async(req.program, t, req.options, std::move(done));
      return;
    }
    compile_thread().post_or_run([&compiler, p = std::move(req), t, done = std::move(done)]() mutable {
      try {
        done(compiler.compile(p.program, t, p.options), nullptr);
      } catch (...) {
        done(jit::compile_result{}, std::current_exception());
      }
    });
  });
}

cuasync_error* compile_image_finish(cuasync_compile_image_finish_args* a) noexcept {
  cuasync_error* compile_error = nullptr;
  cuasync_error* call_error = call("compile_image_finish", a, [&](args<cuasync_compile_image_finish_args>& x) {
    if (!x->result) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "compile_image_finish: result is NULL");
    args<cuasync_compile_image_args> out(x->result, "compile_image_finish");
    auto job = registry::instance().take<compile_job_object>(x->job, kind::compile_job, "job");
    std::unique_lock lock(job->mutex);
    job->finished.wait(lock, [&] { return job->done; });
    if (job->error) {
      compile_error = std::exchange(job->error, nullptr);
      return;
    }
    set_image_outputs(*out, *job->result, job->name_expressions);
    out.write_back();
  });
  return call_error ? call_error : compile_error;
}

cuasync_error* image_destroy(cuasync_image_destroy_args* a) noexcept {
  return call("image_destroy", a, [](args<cuasync_image_destroy_args>& x) {
    registry::instance().take<image_object>(x->image, kind::image, "image");
  });
}

}  // namespace cuasync::c_api
