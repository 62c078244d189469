// Device backend plugins (backends/backend_plugin.h): a plugin answers only the
// interface fingerprint of the build that made it, and a backend without a
// plugin file is an error naming the file and the folders searched.
#include "backends/backend_plugin.h"

#include <gtest/gtest.h>

namespace anymoe {
namespace {

TEST(BackendPlugin, EachBuiltPluginLoadsWithThisBuildsFingerprint) {
  for (const std::string& name : BuiltPluginBackends()) {
    auto entry = LoadBackendPlugin(name, BackendPluginAbi());
    ASSERT_TRUE(entry.ok()) << entry.status().message();
    EXPECT_EQ(entry->name, name);
    EXPECT_NE(entry->create, nullptr);
    EXPECT_NE(entry->supports, nullptr);
    EXPECT_TRUE(entry->device);
  }
}

TEST(BackendPlugin, AnotherBuildsPluginIsRefused) {
  if (BuiltPluginBackends().empty()) GTEST_SKIP() << "this build has no device backend";
  const std::string name = BuiltPluginBackends().front();
  auto entry = LoadBackendPlugin(name, "0000000000000000");
  ASSERT_FALSE(entry.ok());
  EXPECT_NE(entry.status().message().find("libanymoe-" + name + ".so was built by another"),
            std::string::npos)
      << entry.status().message();
  EXPECT_EQ(entry.status().code(), "backend_plugin");
}

TEST(BackendPlugin, MissingPluginNamesTheFileAndTheFolders) {
  auto entry = LoadBackendPlugin("nosuch", BackendPluginAbi());
  ASSERT_FALSE(entry.ok());
  const std::string& m = entry.status().message();
  EXPECT_NE(m.find("backend 'nosuch': libanymoe-nosuch.so not found (looked in "), std::string::npos)
      << m;
  EXPECT_NE(m.find("/../lib/anymoe"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

TEST(BackendPlugin, UnknownBackendIsAnInvalidArgument) {
  auto backend = CreateBackend("nosuch", BackendOptions{});
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(backend.status().message().find("this build has: cpu"), std::string::npos);
}

}  // namespace
}  // namespace anymoe
