// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* The conformance suite's ABI 1.4 part: typed launch arguments. Without a driver: the new fields are checked before
 * any handle is looked at, and a 1.3-sized struct leaves them unread. On a driver (the simulated one compiles to PTX,
 * FAKE_CUDA_COMPUTE_CAPABILITY=95): kernel_get says a C++ kernel's parameter types and their spellings, and says an
 * extern "C" kernel has none; a launch with a mismatching type is refused naming the parameter, its type and the type
 * given (a double* for a float*, a float for an int, an int for a float), one that fits is launched (a CUdeviceptr for
 * a pointer, void*, no type), and an extern "C" kernel keeps its size checks whatever types come with the launch. */
#include "conformance.h"

#include <stdint.h>
#include <string.h>

static const char typed_source[] =
    "template <class T> __global__ void scale(T* x, T a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] *= a;\n"
    "}\n"
    "extern \"C\" __global__ void scale_f32(float* x, float a, int n) { scale<float>(x, a, n); }\n";

static void test_fields_without_driver(void) {
  CHECK(api->abi_minor >= 4);
  void* made_up = (void*)(uintptr_t)0x7a7a7a04;
  uint32_t types[3] = {0, 0, 0};
  cuasync_kernel_get_args kg;
  memset(&kg, 0, sizeof kg);
  kg.struct_size = CUASYNC_KERNEL_GET_ARGS_SIZE;
  kg.module = (cuasync_module)made_up;
  kg.name = "k";
  kg.param_types_capacity = 3; /* a capacity without its array: refused before the module is looked at */
  cuasync_error* e = api->kernel_get(&kg);
  CHECK(message_has(e, "param_types"));
  CHECK(code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  kg.struct_size = CUASYNC_STRUCT_SIZE(cuasync_kernel_get_args, param_sizes_capacity); /* 1.3: not read */
  CHECK(code_of(api->kernel_get(&kg)) == CUASYNC_ERROR_STALE_HANDLE);
  kg.struct_size = CUASYNC_KERNEL_GET_ARGS_SIZE;
  kg.param_types = types;
  CHECK(code_of(api->kernel_get(&kg)) == CUASYNC_ERROR_STALE_HANDLE);

  cuasync_launch_args la;
  memset(&la, 0, sizeof la);
  la.struct_size = CUASYNC_STRUCT_SIZE(cuasync_launch_args, flags); /* 1.3 */
  la.stream = (cuasync_stream)made_up;
  la.kernel = (cuasync_kernel)made_up;
  la.arg_types = types; /* past the caller's struct: not read */
  CHECK(code_of(api->launch(&la)) == CUASYNC_ERROR_STALE_HANDLE);
  la.struct_size = CUASYNC_LAUNCH_ARGS_SIZE;
  CHECK(code_of(api->launch(&la)) == CUASYNC_ERROR_STALE_HANDLE);
}

typedef struct kernel_facts {
  cuasync_kernel kernel;
  size_t num_params;
  uint32_t types[4];
  const char* const* names;
  uint32_t typed;
} kernel_facts;

static int get_kernel(cuasync_module m, const char* name, kernel_facts* out) {
  memset(out, 0, sizeof *out);
  cuasync_kernel_get_args kg;
  memset(&kg, 0, sizeof kg);
  kg.struct_size = CUASYNC_KERNEL_GET_ARGS_SIZE;
  kg.module = m;
  kg.name = name;
  kg.param_types = out->types;
  kg.param_types_capacity = 4;
  if (!ok(api->kernel_get(&kg), "kernel_get")) return 0;
  out->kernel = kg.kernel;
  out->num_params = kg.num_params;
  out->names = kg.param_type_names;
  out->typed = kg.typed;
  return 1;
}

/* An untracked launch of `k` with (x, a, n) of the given sizes and types (NULL: untyped). */
static cuasync_error* launch3(cuasync_stream s, cuasync_kernel k, const void* a, size_t a_size,
                              const uint32_t* types) {
  static const uint64_t x = 0;
  static const int32_t n = 0; /* nothing runs: the pointer is never read */
  cuasync_kernel_arg args[3] = {{&x, sizeof x}, {a, a_size}, {&n, sizeof n}};
  cuasync_launch_args la = launch_args_of(s, k, args, 3);
  la.flags = CUASYNC_LAUNCH_UNTRACKED;
  la.arg_types = types;
  return api->launch(&la);
}

/* True when the launch was refused as an invalid argument with a message holding each of `needles` (NULL-ended). */
static int refused(cuasync_error* e, const char* const* needles) {
  int all = e != NULL;
  for (; e && *needles; ++needles) all &= message_has(e, *needles);
  return code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT && all;
}

static void test_typed_launches(cuasync_runtime rt, cuasync_stream s) {
  static const char* const expressions[] = {"scale<float>"};
  cuasync_compile_args cc;
  memset(&cc, 0, sizeof cc);
  cc.struct_size = CUASYNC_COMPILE_ARGS_SIZE;
  cc.runtime = rt;
  cc.name = "typed.cu";
  cc.source = typed_source;
  cc.name_expressions = expressions;
  cc.num_name_expressions = 1;
  if (!ok(api->compile(&cc), "compile")) return;
  kernel_facts t, c;
  if (!get_kernel(cc.module, "scale<float>", &t) || !get_kernel(cc.module, "scale_f32", &c)) return;

  /* kernel_get: the C++ kernel's types and spellings; none for the extern "C" one. */
  const uint32_t f32_ptr = CUASYNC_ARG_POINTER_TO(CUASYNC_ARG_F32);
  CHECK(t.typed == 1 && t.num_params == 3 && t.types[0] == f32_ptr && t.types[1] == CUASYNC_ARG_F32 &&
        t.types[2] == CUASYNC_ARG_I32);
  CHECK(t.names && strcmp(t.names[0], "float*") == 0 && strcmp(t.names[1], "float") == 0 &&
        strcmp(t.names[2], "int") == 0);
  CHECK(c.typed == 0 && c.num_params == 3 && c.names == NULL && c.types[0] == CUASYNC_ARG_TYPE_NONE &&
        c.types[2] == CUASYNC_ARG_TYPE_NONE);

  const float a = 2.0f;
  const int32_t a_int = 2;
  /* What fits: the exact types, a CUdeviceptr or void* for the pointer, no type for one argument, no types at all. */
  const uint32_t exact[3] = {f32_ptr, CUASYNC_ARG_F32, CUASYNC_ARG_I32};
  const uint32_t devptr[3] = {CUASYNC_ARG_I64, CUASYNC_ARG_F32, CUASYNC_ARG_TYPE_NONE};
  const uint32_t untyped_ptr[3] = {CUASYNC_ARG_VOID_POINTER, CUASYNC_ARG_TYPE_NONE, CUASYNC_ARG_I32};
  CHECK(ok(launch3(s, t.kernel, &a, sizeof a, exact), "typed launch"));
  CHECK(ok(launch3(s, t.kernel, &a, sizeof a, devptr), "typed launch, CUdeviceptr"));
  CHECK(ok(launch3(s, t.kernel, &a, sizeof a, untyped_ptr), "typed launch, void*"));
  CHECK(ok(launch3(s, t.kernel, &a, sizeof a, NULL), "untyped launch"));

  /* What does not: each refused naming the parameter, its type and the type given. */
  const uint32_t f64_ptr[3] = {CUASYNC_ARG_POINTER_TO(CUASYNC_ARG_F64), CUASYNC_ARG_F32, CUASYNC_ARG_I32};
  const char* const want_f64[] = {"'scale<float>' parameter 0 is float* but argument 0 is double*", NULL};
  CHECK(refused(launch3(s, t.kernel, &a, sizeof a, f64_ptr), want_f64));
  const uint32_t int_for_float[3] = {f32_ptr, CUASYNC_ARG_I32, CUASYNC_ARG_I32};
  const char* const want_int[] = {"parameter 1 is float but argument 1 is int", NULL};
  CHECK(refused(launch3(s, t.kernel, &a_int, sizeof a_int, int_for_float), want_int));
  const uint32_t float_for_int[3] = {f32_ptr, CUASYNC_ARG_F32, CUASYNC_ARG_F32};
  const char* const want_float[] = {"parameter 2 is int but argument 2 is float", NULL};
  CHECK(refused(launch3(s, t.kernel, &a, sizeof a, float_for_int), want_float));
  const uint32_t bad_code[3] = {f32_ptr, 0x77u, CUASYNC_ARG_I32};
  const char* const want_code[] = {"parameter 1", "0x00000077", "CUASYNC_ARG_TYPE", NULL};
  CHECK(refused(launch3(s, t.kernel, &a, sizeof a, bad_code), want_code));
  /* A type that fits is still held to its size: a double passed as float-typed 8 bytes. */
  const double wide = 2.0;
  const char* const want_size[] = {"parameter 1 is 4 bytes but argument 1 is 8", NULL};
  CHECK(refused(launch3(s, t.kernel, &wide, sizeof wide, exact), want_size));

  /* extern "C": types are not known, so those given are not checked; sizes are. */
  CHECK(ok(launch3(s, c.kernel, &a, sizeof a, f64_ptr), "extern \"C\" launch with types"));
  CHECK(refused(launch3(s, c.kernel, &wide, sizeof wide, exact), want_size));

  cuasync_module_destroy_args md = {CUASYNC_MODULE_DESTROY_ARGS_SIZE, cc.module};
  CHECK(ok(api->module_destroy(&md), "module_destroy"));
  printf("abi 1.4: typed launches checked (kernel_get types, 4 fitting launches, 5 refusals, extern \"C\" sizes)\n");
}

void run_abi_1_4_part(int with_driver) {
  test_fields_without_driver();
  if (!with_driver) return;
  fixture f;
  if (!open_fixture(&f)) return;
  test_typed_launches(f.runtime, f.stream);
  close_fixture(&f);
}
