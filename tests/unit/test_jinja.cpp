// The Jinja engine (core/jinja): every feature case rendered as Hugging
// Face's JavaScript Jinja renders it (tests/fixtures/jinja/feature_reference.json,
// made by @huggingface/jinja), Python's semantics where that engine departs
// from Jinja2 (transformers renders with Jinja2), the lexer's tokens and
// positions, errors naming the unsupported construct and where it is, and
// the render trace the chat renderer derives loss masks from.
#include "catch.h"

#include "core/jinja/lexer.h"
#include "core/jinja/template.h"

#include <nlohmann/json.hpp>

#include <ctime>
#include <filesystem>
#include <fstream>

using namespace ptrain::jinja;
namespace fs = std::filesystem;

namespace {

const fs::path kJinjaFixtures = fs::path(PTRAIN_TOKENIZER_FIXTURE_DIR).parent_path() / "jinja";

nlohmann::ordered_json read_json(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return nlohmann::ordered_json::parse(in);
}

std::string render(const std::string& source, const Dict& variables = {}) { return Template(source).render(variables); }

// The message of the TemplateError that parsing `source` throws.
std::string parse_error(const std::string& source) {
  try {
    Template parsed(source);
  } catch (const TemplateError& error) {
    return error.what();
  }
  FAIL("no error parsing: " << source);
  return "";
}

std::string render_error(const std::string& source, const Dict& variables = {}) {
  try {
    render(source, variables);
  } catch (const std::exception& error) {
    return error.what();
  }
  FAIL("no error rendering: " << source);
  return "";
}

}  // namespace

TEST_CASE("jinja: every feature case renders as @huggingface/jinja renders it", "[jinja]") {
  const auto cases = read_json(kJinjaFixtures / "feature_cases.json");
  const auto reference = read_json(kJinjaFixtures / "feature_reference.json").at("results");
  REQUIRE(cases.size() == reference.size());
  REQUIRE(cases.size() >= 30);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    INFO(c.at("name").get<std::string>() << ": " << c.at("template").get<std::string>());
    const Value context = Value::from_json(c.at("context"));
    const Template parsed(c.at("template").get<std::string>());
    if (reference[i].contains("error")) {  // raise_exception: the template's own message
      CHECK_THROWS_WITH(parsed.render(context.as_dict()), reference[i].at("error").get<std::string>());
    } else {
      CHECK(parsed.render(context.as_dict()) == reference[i].at("text").get<std::string>());
    }
  }
}

TEST_CASE("jinja: Python's semantics where the JavaScript engine departs from Jinja2", "[jinja]") {
  // Jinja2 prints Python's str(): True, None, and lists and dicts as repr.
  CHECK(render("{{ true }} {{ false }} {{ none }}") == "True False None");
  CHECK(render("{{ [1, 'a', \"it's\"] }} {{ {'k': none} }}") == "[1, 'a', \"it's\"] {'k': None}");
  CHECK(render("{{ 2.5 }} {{ 10 / 4 }} {{ 4 / 2 }} {{ 0.1 + 0.2 }}") == "2.5 2.5 2.0 0.30000000000000004");
  // Python's floor division and modulo take the divisor's sign.
  CHECK(render("{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }}") == "-4 2 -2");
  // str.strip(chars) strips only those characters (the JavaScript engine strips whitespace).
  CHECK(render("[{{ '\\n x \\n'.strip('\\n') }}][{{ 'xxaxx'.lstrip('x') }}][{{ 'xxaxx'.rstrip('x') }}]") ==
        "[ x ][axx][xxa]");
  CHECK(render("[{{ '--a--' | trim('-') }}]") == "[a]");
  // Strings compare by code point; 'in' on dicts looks at keys.
  CHECK(render("{{ 'a' < 'b' }} {{ 'b' < 'a' }}") == "True False");
  // String length and slicing count code points, not bytes.
  CHECK(render("{{ 'héllo😀' | length }} {{ 'héllo😀'[-1] }} {{ 'héllo😀'[1:2] }}") == "6 😀 é");
  // Python's split(None) drops empty parts; maxsplit keeps the rest whole.
  CHECK(render("{{ '  a  b c '.split(none, 1) | join('|') }}") == "a|b c");
}

TEST_CASE("jinja: the lexer applies trim_blocks, lstrip_blocks and whitespace control, with positions", "[jinja]") {
  const std::vector<Token> tokens = tokenize("a\n  {% if x -%}\n  b{{- y }}\n");
  std::vector<int> kinds;  // as ints, so that Catch can print them
  for (const Token& token : tokens) kinds.push_back(static_cast<int>(token.kind));
  using K = Token::Kind;
  std::vector<int> expected;
  for (const K kind : {K::kText, K::kOpenStatement, K::kName, K::kName, K::kCloseStatement, K::kText,
                       K::kOpenExpression, K::kName, K::kCloseExpression, K::kEnd}) {
    expected.push_back(static_cast<int>(kind));
  }
  CHECK(kinds == expected);
  CHECK(tokens[0].text == "a\n");  // lstrip_blocks took the indentation before {%
  CHECK(tokens[5].text == "b");    // -%} took "\n  ", {{- nothing
  CHECK(tokens[1].position.line == 2);
  CHECK(tokens[1].position.column == 3);
  CHECK(tokens[7].position.line == 3);
  CHECK(tokens[7].position.column == 8);
  // The template's one trailing newline goes; a newline after {{ }} stays (trim_blocks is for blocks).
  CHECK(render("{{ 'x' }}\n{% if true %}\ny\n{% endif %}\n") == "x\ny\n");
  CHECK(render("  {{ 'kept' }}") == "  kept");  // lstrip_blocks leaves expressions alone
}

TEST_CASE("jinja: an unsupported construct is refused at parse time, naming it and its position", "[jinja]") {
  CHECK_THAT(parse_error("ok\n   {% macro greet(name) %}hi{% endmacro %}"),
             Catch::Contains("line 2, column 7") && Catch::Contains("unsupported tag 'macro'"));
  CHECK_THAT(parse_error("{{ items | map(attribute='x') }}"), Catch::Contains("line 1, column 12") &&
                                                                  Catch::Contains("unsupported filter 'map'") &&
                                                                  Catch::Contains("supported: "));
  CHECK_THAT(parse_error("{% if x is divisibleby(3) %}{% endif %}"),
             Catch::Contains("line 1, column 12") && Catch::Contains("unsupported test 'is divisibleby'"));
  CHECK_THAT(parse_error("{{ name.zfill(3) }}"),
             Catch::Contains("line 1, column 14") && Catch::Contains("unsupported method '.zfill()'"));
  CHECK_THAT(parse_error("{{ cycler('a', 'b') }}"), Catch::Contains("unsupported function 'cycler()'"));
  CHECK_THAT(parse_error("{% for m in messages recursive %}{% endfor %}"),
             Catch::Contains("unsupported: recursive for loops"));
  CHECK_THAT(parse_error("{% for m in messages %}x"), Catch::Contains("missing {% endfor %}"));
  CHECK_THAT(parse_error("a\n{{ x "), Catch::Contains("line 2, column 1") && Catch::Contains("never closed"));
  CHECK_THAT(parse_error("{{ 'abc }}"), Catch::Contains("string literal is never closed"));
  CHECK_THAT(parse_error("{# note"), Catch::Contains("comment {# is never closed"));
  CHECK_THAT(parse_error("{% if x %}{% else %}{% elif y %}{% endif %}"),
             Catch::Contains("line 1, column 4: {% if %} is left open: {% elif %} at line 1, column 24 comes before "
                             "its {% endif %}"));
  // The block left open is the error, not the end tag that meets it.
  CHECK_THAT(parse_error("{% for m in messages %}\n  {% if m.role == 'user' %}{{ m.content }}\n{% endfor %}"),
             Catch::Contains("line 2, column 6: {% if %} is left open: {% endfor %} at line 3, column 4 comes "
                             "before its {% endif %}"));
  CHECK_THAT(parse_error("{% if x %}\n{% for m in messages %}{% endif %}"),
             Catch::Contains("line 2, column 4: {% for %} is left open: {% endif %} at line 2, column 27"));
  CHECK_THAT(parse_error("x{% endfor %}"),
             Catch::Contains("line 1, column 5: unexpected {% endfor %}: no open block ends or continues here"));
  CHECK_THAT(parse_error("{% if x %}\n{% for m in messages %}x"),
             Catch::Contains("line 2, column 4: {% for %} is never closed: missing {% endfor %}"));
  CHECK_THAT(parse_error("{{ a b }}"), Catch::Contains("expected '}}', got 'b'"));
  CHECK_THAT(parse_error("{{ 1 + }}"), Catch::Contains("expected an expression, got '}}'"));
}

TEST_CASE("jinja: render errors name the operation, the types and the position", "[jinja]") {
  const Dict variables = {{"n", Value::integer(1)}, {"s", Value::string("x")}};
  CHECK_THAT(render_error("\n  {{ s + n }}", variables),
             Catch::Contains("line 2, column 8") && Catch::Contains("operator '+' between a string and a int"));
  CHECK_THAT(render_error("{% for c in n %}{% endfor %}", variables), Catch::Contains("a for loop over a int"));
  CHECK_THAT(render_error("{% set s.x = 1 %}", variables), Catch::Contains("cannot set attribute 'x' of a string"));
  CHECK_THAT(render_error("{{ 1 // 0 }}"), Catch::Contains("division by zero"));
  CHECK_THROWS_AS(render("{{ raise_exception('no system messages') }}"), TemplateRaised);
  CHECK_THROWS_WITH(render("{{ raise_exception('no system messages') }}"), "no system messages");
}

TEST_CASE("jinja: the trace records each loop visit of a dict and each generation block", "[jinja]") {
  const Value first = Value::dict({{"c", Value::string("ab")}});
  const Value second = Value::dict({{"c", Value::string("cde")}});
  const Template parsed(
      "<{% for m in ms %}{% if loop.first %}{% generation %}[{{ m.c }}]{% endgeneration %}{% else %}{{ m.c }}"
      "{% endif %};{% endfor %}>");
  RenderTrace trace;
  const std::string text = parsed.render({{"ms", Value::list({first, second})}}, &trace);
  CHECK(text == "<[ab];cde;>");
  REQUIRE(trace.visits.size() == 2);
  CHECK(trace.visits[0].item == first.identity());
  CHECK(text.substr(trace.visits[0].begin, trace.visits[0].end - trace.visits[0].begin) == "[ab];");
  CHECK(trace.visits[1].item == second.identity());
  CHECK(text.substr(trace.visits[1].begin, trace.visits[1].end - trace.visits[1].begin) == "cde;");
  REQUIRE(trace.generation_spans.size() == 1);
  CHECK(text.substr(trace.generation_spans[0].first, 4) == "[ab]");
  CHECK(trace.generation_spans[0].second - trace.generation_spans[0].first == 4);
  CHECK(parsed.has_generation_blocks());
  CHECK_FALSE(Template("{{ x }}").has_generation_blocks());
}

TEST_CASE("jinja: strftime_now is defined and gives the local date, as transformers passes it", "[jinja]") {
  // Llama 3.2's template asks for the date this way.
  const std::string source =
      "{%- if not date_string is defined %}{%- if strftime_now is defined %}"
      "{%- set date_string = strftime_now('%d %b %Y') %}{%- else %}{%- set date_string = '26 Jul 2024' %}"
      "{%- endif %}{%- endif %}Today Date: {{ date_string }}";
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char expected[64];
  std::strftime(expected, sizeof expected, "Today Date: %d %b %Y", &local);
  CHECK(render(source) == expected);
  CHECK(render(source, {{"date_string", Value::string("1 Jan 2025")}}) == "Today Date: 1 Jan 2025");
  CHECK(render("{{ raise_exception is defined }} {{ namespace is defined }} {{ nothing is defined }}") ==
        "True True False");
}
