// The chat page (web/index.html) in headless Chromium against a server whose
// "model" writes known text (ScriptedService) through the real GLM-5 template
// and parsers: reasoning folded and kept as text, Markdown rendered and
// sanitised (the reply carries an <img onerror> and a <script>), a tool call
// shown, its result sent back as a tool message, and the conversation still
// there after a reload. Skipped when Chromium is not installed.
// ANYMOE_WEB_SCREENSHOT=FILE.png saves the page at the end (docs/).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "headless_chromium.h"
#include "scripted_service.h"
#include "server_fixture.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;

// The GLM-5 template's generation prompt ends inside <think>: text up to
// </think> is reasoning.
const std::vector<std::string> kScripts = {
    "Thinking about <b>markup</b>.</think>Here is **bold**, `code` and\n\n"
    "```python\nprint(1)\n```\n\n"
    "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>",
    "The user wants weather.</think>Checking.<tool_call>get_weather<arg_key>city</arg_key>"
    "<arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>",
    "Sunny days.</think>It will be **sunny** in Paris.",
};

class WebChat : public ServerTest {
 protected:
  void SetUp() override {
    chromium_ = FindChromium();
    if (chromium_.empty()) {
      GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it)";
    }
    dir_ = std::filesystem::temp_directory_path() / ("anymoe_web_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    ServerTest::TearDown();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string Url(const std::string& query = "") const {
    return "http://127.0.0.1:" + std::to_string(server_->port()) + "/" + query;
  }
  std::string chromium_;
  std::filesystem::path dir_;
};

TEST_F(WebChat, MarkdownReasoningToolCallsAndKeptConversationsInHeadlessChromium) {
  StartServer({}, {}, /*ready=*/false, Glm5Folder());
  ScriptedService scripted(kScripts, 4);
  server_->SetReady({engine_, &scripted, context_});
  const std::string profile = (dir_ / "profile").string();
  const std::string done = "document.body.dataset.state === 'done'";
  {
    HeadlessChromium browser(chromium_, profile, (dir_ / "chromium.log").string());
    const std::string tab = browser.Open(Url("?q=hello&autosend=1&temperature=0"));
    ASSERT_FALSE(tab.empty());
    ASSERT_TRUE(browser.WaitFor(tab, done, std::chrono::seconds(30)));
    EXPECT_EQ(browser.Text(tab, "document.body.dataset.markdown"), "on");
    // Reasoning: folded, and shown as text (its "<b>" is not an element).
    EXPECT_EQ(browser.Text(tab, "document.querySelector('.assistant details summary').textContent"),
              "reasoning");
    EXPECT_EQ(browser.Text(tab, "document.querySelector('.assistant details div').textContent"),
              "Thinking about <b>markup</b>.");
    EXPECT_EQ(browser.Evaluate(tab, "document.querySelectorAll('.assistant details b').length"), 0);
    // Markdown rendered; the HTML it carried made harmless.
    EXPECT_EQ(browser.Text(tab, "document.querySelector('.assistant .md strong').textContent"),
              "bold");
    EXPECT_EQ(browser.Text(tab, "document.querySelector('.assistant .md pre code').textContent"),
              "print(1)\n");
    EXPECT_EQ(browser.Evaluate(tab, "document.querySelectorAll('[onerror]').length"), 0);
    EXPECT_EQ(browser.Evaluate(tab, "document.querySelectorAll('#log script').length"), 0);
    EXPECT_EQ(browser.Text(tab, "document.title").find("pwned"), std::string::npos);
    EXPECT_NE(
        browser.Text(tab, "document.querySelector('.stats').textContent").find("first token after"),
        std::string::npos);
    EXPECT_NE(
        browser.Text(tab, "document.getElementById('model-name').textContent").find("llama_tiny"),
        std::string::npos);

    // A reply that calls a tool: shown, and the next input is its result.
    ASSERT_TRUE(browser.Evaluate(tab,
                                 "document.getElementById('example-tools').click();"
                                 "submit('Weather in Paris?'); true"));
    ASSERT_TRUE(browser.WaitFor(tab, done + " && document.querySelector('.tool-call') !== null",
                                std::chrono::seconds(30)));
    EXPECT_EQ(browser.Text(tab, "document.querySelector('.tool-call').textContent"),
              R"(get_weather({"city": "Paris", "days": 3}))");
    const json calls =
        json::parse(browser.Text(tab, "document.getElementById('last-tool-calls').textContent"));
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    EXPECT_NE(browser.Text(tab, "document.getElementById('input').placeholder")
                  .find("Result of get_weather"),
              std::string::npos);
    ASSERT_TRUE(browser.Evaluate(tab, "submit('18 C, clear sky'); true"));
    ASSERT_TRUE(browser.WaitFor(tab,
                                done + " && document.querySelectorAll('.assistant').length === 3",
                                std::chrono::seconds(30)));
    EXPECT_EQ(browser.Text(tab, "JSON.stringify(chat.messages.map((m) => m.role))"),
              R"(["user","assistant","user","assistant","tool","assistant"])");
    EXPECT_EQ(browser.Text(tab, "chat.messages[4].tool_call_id"), calls[0]["id"]);
    EXPECT_EQ(
        browser.Text(tab, "document.querySelectorAll('.assistant .md strong')[1].textContent"),
        "sunny");
    if (const char* png = std::getenv("ANYMOE_WEB_SCREENSHOT")) {
      std::ofstream(png, std::ios::binary) << browser.Screenshot(tab);
    }
  }
  // Three requests reached the server; the last one's prompt carries the
  // tool result (rendered by the template, so longer than the second's).
  const auto prompts = scripted.prompts();
  ASSERT_EQ(prompts.size(), 3u);
  EXPECT_GT(prompts[2].size(), prompts[1].size());

  // A new browser on the same profile: the conversation is listed and reopened.
  HeadlessChromium browser(chromium_, profile, (dir_ / "chromium2.log").string());
  const std::string tab = browser.Open(Url());
  ASSERT_FALSE(tab.empty());
  ASSERT_TRUE(browser.WaitFor(tab, "document.querySelectorAll('#log .msg').length === 6",
                              std::chrono::seconds(30)));
  EXPECT_EQ(browser.Text(tab, "document.querySelector('#conversations .chat span').textContent"),
            "hello");
  EXPECT_EQ(browser.Text(tab, "document.querySelector('.tool-call').textContent"),
            R"(get_weather({"city": "Paris", "days": 3}))");
}

}  // namespace
}  // namespace anymoe::testing
