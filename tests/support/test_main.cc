// main() of every GoogleTest binary: pins the environment the tests need before anything
// reads it (ctest cannot pass several variables through gtest_discover_tests in CMake 3.25).
// A value already set by the caller wins.
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

namespace {

void setDefault(const char* name, const std::string& value) { setenv(name, value.c_str(), 0); }

std::string exeDir() {
  char path[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  std::string p(path, n > 0 ? static_cast<size_t>(n) : 0);
  return p.substr(0, p.rfind('/'));
}

}  // namespace

int main(int argc, char** argv) {
  setDefault("ZCOLL_SOCKET_IFNAME", "lo");  // tests bind loopback only
  setDefault("UCX_NET_DEVICES", "lo");      // the machine also has an eth0
  setDefault("ZCOLL_TIMEOUT", "60");
  setDefault("ZCOLL_TEST_BIN_DIR", exeDir());
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
