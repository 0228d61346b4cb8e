// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Compiling without a GPU (ABI 1.2): NVRTC through cuasync's caches for an architecture the caller names, the image
// returned as bytes in an object the caller destroys. Also the reading of a program from a call's arguments, which
// compile shares.
#include "calls.hpp"
#include "handles.hpp"

#include <cuasync/jit/compiler.hpp>

#include <charconv>
#include <string>
#include <string_view>
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

cuasync_error* compile_image(cuasync_compile_image_args* a) noexcept {
  return call("compile_image", a, [](args<cuasync_compile_image_args>& x) {
    program_request req = read_program("compile_image", x->name, x->source, x->options, x->num_options, x->headers,
                                       x->num_headers, x->name_expressions, x->num_name_expressions);
    jit::compiler& compiler = jit::default_compiler();
    const jit::target t = target_of(x->arch, compiler.nvrtc_identity());
    const jit::compile_result r = compiler.compile(req.program, t, req.options);
    auto image = std::make_shared<image_object>();
    image->program = r.program;
    image->architecture = r->target.architecture();
    if (r->target.kind == jit::output_kind::ptx) image->text.assign(r->text());
    for (std::size_t i = 0; i < x->num_name_expressions; ++i)
      image->lowered.push_back(r->lowered_name(x->name_expressions[i]));
    for (const std::string& l : image->lowered) image->lowered_pointers.push_back(l.c_str());
    x->data = image->text.empty() ? static_cast<const void*>(r->image.data()) : image->text.c_str();
    x->size = r->image.size();
    x->kind = r->target.kind == jit::output_kind::ptx ? CUASYNC_IMAGE_PTX : CUASYNC_IMAGE_CUBIN;
    x->architecture = image->architecture.c_str();
    x->log = r->log.c_str();
    x->log_size = r->log.size();
    x->lowered_names = image->lowered_pointers.empty() ? nullptr : image->lowered_pointers.data();
    x->image = to_handle<cuasync_image>(registry::instance().add(kind::image, std::move(image)));
  });
}

cuasync_error* image_destroy(cuasync_image_destroy_args* a) noexcept {
  return call("image_destroy", a, [](args<cuasync_image_destroy_args>& x) {
    registry::instance().take<image_object>(x->image, kind::image, "image");
  });
}

}  // namespace cuasync::c_api
