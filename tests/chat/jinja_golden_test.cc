// Renders every conversation of tests/golden/chat/jinja_render.golden.json
// (real templates rendered by transformers + jinja2, tools/gen_chat_jinja_golden.py)
// and requires byte-identical text, or the same raise_exception message.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "chat/model_chat_template.h"

namespace anymoe {
namespace {

using Json = nlohmann::ordered_json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(JinjaGolden, RealTemplatesRenderLikeTransformers) {
  const std::string dir = std::string(ANYMOE_GOLDEN_DIR) + "/chat/";
  const Json golden = Json::parse(ReadFile(dir + "jinja_render.golden.json"));
  std::map<std::string, ModelChatTemplate> templates;
  for (const auto& [name, tokens] : golden["templates"].items()) {
    auto t = ModelChatTemplate::Parse(ReadFile(dir + "templates/" + name),
                                      tokens["bos_token"].is_string() ? tokens["bos_token"].get<std::string>() : "",
                                      tokens["eos_token"].is_string() ? tokens["eos_token"].get<std::string>() : "");
    ASSERT_TRUE(t.ok()) << name << ": " << t.status().message();
    templates.emplace(name, std::move(*t));
  }
  std::map<std::string, int> rendered, raised;
  int failures = 0;
  for (const Json& c : golden["cases"]) {
    const std::string name = c["template"].get<std::string>();
    ChatRenderRequest request;
    request.messages = c["messages"];
    request.tools = c["tools"];
    request.kwargs = c["kwargs"];
    request.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    const auto r = templates.at(name).Render(request);
    const std::string label = name + " / " + c["name"].get<std::string>();
    if (c.contains("expected")) {
      if (!r.ok()) {
        ADD_FAILURE() << label << ": " << r.status().message();
        ++failures;
      } else if (r->text != c["expected"].get<std::string>()) {
        ADD_FAILURE() << label << "\n--- got ---\n" << r->text << "\n--- want ---\n"
                      << c["expected"].get<std::string>();
        ++failures;
      } else {
        ++rendered[name];
      }
    } else {
      const std::string type = c["error"]["type"].get<std::string>();
      if (r.ok()) {
        ADD_FAILURE() << label << ": rendered, but transformers raised " << type;
        ++failures;
      } else if (type == "TemplateError" &&
                 r.status().message() != "chat template raised: " + c["error"]["message"].get<std::string>()) {
        ADD_FAILURE() << label << ": " << r.status().message() << " vs "
                      << c["error"]["message"].get<std::string>();
        ++failures;
      } else {
        ++raised[name];
      }
    }
    if (failures > 20) break;
  }
  for (const auto& [name, n] : rendered) {
    std::printf("%s: %d byte-identical, %d raised alike\n", name.c_str(), n, raised[name]);
  }
}

}  // namespace
}  // namespace anymoe
