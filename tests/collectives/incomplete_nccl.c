// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* A library that is not the whole NCCL: the loader must refuse it and name what it lacks. */
int ncclGetVersion(int* version) {
  *version = 21000;
  return 0;
}
