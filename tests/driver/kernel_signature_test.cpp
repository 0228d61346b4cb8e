// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Kernel parameter types decoded from mangled names (names as g++ and NVRTC mangle them; c++filt's reading in each
// comment), the codes of C++ argument types, and which arguments fit which parameters. No GPU.
#include <cuasync/driver/kernel_signature.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>

using namespace cuasync;

namespace {
std::vector<std::string> spellings(std::string_view mangled) {
  auto d = decode_kernel_parameters(mangled);
  REQUIRE(d.has_value());
  std::vector<std::string> out;
  for (const auto& p : *d) out.push_back(p.spelling);
  return out;
}
std::vector<type_code> codes(std::string_view mangled) {
  auto d = decode_kernel_parameters(mangled);
  REQUIRE(d.has_value());
  std::vector<type_code> out;
  for (const auto& p : *d) out.push_back(p.code);
  return out;
}
using V = std::vector<std::string>;
}  // namespace

TEST_CASE("parameter types come from templated, nested and plain kernels' mangled names", "[driver][signature]") {
  // void saxpy<float, 256>(float, float const*, float*, int)
  CHECK(spellings("_Z5saxpyIfLi256EEvT_PKS0_PS0_i") == V{"float", "const float*", "float*", "int"});
  CHECK(codes("_Z5saxpyIfLi256EEvT_PKS0_PS0_i") ==
        std::vector<type_code>{type_code_of<float>(), type_code_of<const float*>(), type_code_of<float*>(),
                               type_code_of<int>()});
  // void ns::reduce<double>(double const*, double*, int)
  CHECK(spellings("_ZN2ns6reduceIdEEvPKT_PS1_i") == V{"const double*", "double*", "int"});
  // void outer::inner::k5<float, int>(float const*, int*, float const*, unsigned long long)
  CHECK(spellings("_ZN5outer5inner2k5IfiEEvPKT_PT0_S4_y") ==
        V{"const float*", "int*", "const float*", "unsigned long long"});
  // void apply<float>(float*, int)
  CHECK(spellings("_Z5applyIfEvPT_i") == V{"float*", "int"});
  // func(__half const*, float2*, void*, void const*)
  CHECK(spellings("_Z4funcPK6__halfP6float2PvPKv") == V{"const __half*", "float2*", "void*", "const void*"});
  // box(cuda::std::array<float, 4ul>, cuda::std::array<float, 4ul>*)
  CHECK(spellings("_Z3boxN4cuda3std5arrayIfLm4EEEPS2_") ==
        V{"cuda::std::array<float, 4>", "cuda::std::array<float, 4>*"});
  // void k1<ns::Vec>(ns::Vec*, ns::Vec*)
  CHECK(spellings("_Z2k1IN2ns3VecEEvPT_S3_") == V{"ns::Vec*", "ns::Vec*"});
  // k2(float**, double const* const*)
  CHECK(spellings("_Z2k2PPfPKPKd") == V{"float**", "const double* const*"});
  // k3(long, unsigned int, signed char, bool, double, Mode, unsigned char*)
  CHECK(spellings("_Z2k3ljabd4ModePh") ==
        V{"long", "unsigned int", "signed char", "bool", "double", "Mode", "unsigned char*"});
  // void k4<double>(ns::Box<double>, ns::Box<double>*, double)
  CHECK(spellings("_Z2k4IdEvN2ns3BoxIT_EEPS3_S2_") == V{"ns::Box<double>", "ns::Box<double>*", "double"});
  // k7(float*, int volatile*), void k8<true>(unsigned long long*), k6()
  CHECK(spellings("_Z2k7PfPVi") == V{"float*", "volatile int*"});
  CHECK(spellings("_Z2k8ILb1EEvPy") == V{"unsigned long long*"});
  CHECK(spellings("_Z2k6v").empty());
}

TEST_CASE("names the decoder does not read give no types, never a guess", "[driver][signature]") {
  CHECK_FALSE(decode_kernel_parameters("fill"));                  // extern "C"
  CHECK_FALSE(decode_kernel_parameters("_Z2k9Rf"));               // a reference
  CHECK_FALSE(decode_kernel_parameters("_Z3k10PFvvE"));           // a function pointer
  CHECK_FALSE(decode_kernel_parameters("_Z3k11IJifEEvDpT_"));     // a pack
  CHECK_FALSE(decode_kernel_parameters("_Z5saxpyIfLi256EEvT_PKS9_PS0_i"));  // a substitution that does not exist
  CHECK_FALSE(decode_kernel_parameters("_Z5saxpyIfLi256EEvT3_"));  // a template parameter that does not exist
  CHECK_FALSE(decode_kernel_parameters("_Z99x"));                  // a name longer than the text
  CHECK_FALSE(decode_kernel_parameters("_Z"));
  CHECK_FALSE(decode_kernel_parameters(""));
  // Every prefix of a valid name, and random bytes after _Z, are refused or decoded without a crash.
  const std::string good = "_ZN5outer5inner2k5IfiEEvPKT_PT0_S4_y";
  for (std::size_t n = 0; n < good.size(); ++n) (void)decode_kernel_parameters(good.substr(0, n));
  std::mt19937 rng(29);
  const std::string alphabet = "_ZNEILSTPKVfidvyj0123456789";
  for (int round = 0; round < 2000; ++round) {
    std::string s = "_Z";
    for (int c = 0; c < 24; ++c) s += alphabet[rng() % alphabet.size()];
    (void)decode_kernel_parameters(s);
  }
}

TEST_CASE("C++ argument types have codes at compile time", "[driver][signature]") {
  STATIC_REQUIRE(type_code_of<float*>() == type_code_of<const float*>());
  STATIC_REQUIRE(type_code_of<int>() == type_code_of<unsigned>());
  STATIC_REQUIRE(type_code_of<long>() == type_code_of<long long>());
  STATIC_REQUIRE(type_code_of<float*>() != type_code_of<double*>());
  STATIC_REQUIRE(type_code_of<int>() != type_code_of<float>());
  STATIC_REQUIRE(type_code_of<float**>().pointers() == 2);
  struct pod {
    int a, b;
  };
  STATIC_REQUIRE(type_code_of<pod>().kind() == type_class::opaque);
  CHECK(type_code_of<double*>().describe() == "double*");
  CHECK(type_code_of<std::int64_t>().describe() == "long long");
  CHECK(type_code_of<pod>().describe() == "an opaque value");
}

TEST_CASE("which arguments fit which parameters", "[driver][signature]") {
  const auto fits = [](auto param, auto arg) {
    return compatible(type_code_of<decltype(param)>(), type_code_of<decltype(arg)>());
  };
  struct pod16 {
    double a, b;
  };
  using cudeviceptr = unsigned long long;
  CHECK(fits((const float*)nullptr, (float*)nullptr));
  CHECK(fits((float*)nullptr, cudeviceptr{}));  // a CUdeviceptr for any pointer
  CHECK(fits(cudeviceptr{}, (float*)nullptr));  // and a pointer for a CUdeviceptr
  CHECK(fits((void*)nullptr, (double*)nullptr));
  CHECK(fits((float*)nullptr, (void*)nullptr));
  CHECK(fits(pod16{}, pod16{}));
  CHECK(fits(0, 0u));
  CHECK_FALSE(fits((float*)nullptr, (double*)nullptr));
  CHECK_FALSE(fits((float*)nullptr, (float**)nullptr));
  CHECK_FALSE(fits(0.0f, 0));
  CHECK_FALSE(fits(0, 0.0f));
  CHECK_FALSE(fits(0ll, 0.0));
  CHECK_FALSE(fits(true, (char)0));
  CHECK_FALSE(fits((float*)nullptr, 0));  // a 4-byte integer is no address
}
