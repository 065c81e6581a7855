// chat/chat_template.cpp — see chat_template.h. The module border: every JinjaError (and any other
// exception from inside) becomes a Status here.
#include "chat/chat_template.h"

#include <charconv>
#include <exception>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "chat/jinja_interpreter.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_parser.h"

namespace helium {

namespace {

Status template_error(const jinja::JinjaError& error, std::string_view source) {
  if (error.raised_by_template) {
    return Status::error("chat template raised an exception: " + std::string(error.what()));
  }
  if (error.offset() == jinja::JinjaError::kNoOffset)
    return Status::error("chat template: " + std::string(error.what()));
  return Status::error("chat template " + jinja::describe_location(source, error.offset()) + ": " +
                       error.what());
}

// "YYYY-MM-DD", optionally followed by "THH:MM" or " HH:MM" and ":SS".
std::optional<jinja::CivilTime> parse_civil_time(std::string_view text) {
  auto number = [&](size_t pos, size_t digits, int& out) {
    if (pos + digits > text.size()) return false;
    const auto [end, ec] = std::from_chars(text.data() + pos, text.data() + pos + digits, out);
    return ec == std::errc() && end == text.data() + pos + digits;
  };
  jinja::CivilTime t;
  if (!number(0, 4, t.year) || text.size() < 10 || text[4] != '-' || !number(5, 2, t.month) ||
      text[7] != '-' || !number(8, 2, t.day)) {
    return std::nullopt;
  }
  if (text.size() == 10) return t;
  if ((text[10] != 'T' && text[10] != ' ') || !number(11, 2, t.hour) || text.size() < 16 || text[13] != ':' ||
      !number(14, 2, t.minute)) {
    return std::nullopt;
  }
  if (text.size() == 16) return t;
  if (text.size() != 19 || text[16] != ':' || !number(17, 2, t.second)) return std::nullopt;
  return t;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  try {
    return ChatTemplate(jinja::parse_program(source));
  } catch (const jinja::JinjaError& error) {
    return template_error(error, source);
  } catch (const std::bad_alloc&) {
    return Status::error("chat template: out of memory while parsing");
  } catch (const std::exception& error) {
    return Status::error(std::string("chat template: ") + error.what());
  }
}

Result<std::string> ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  try {
    if (!inputs.messages.is_array()) return Status::error("chat template: messages must be a list");
    if (!inputs.tools.is_null() && !inputs.tools.is_array()) {
      return Status::error("chat template: tools must be null or a list");
    }
    if (!inputs.extra.is_object()) return Status::error("chat template: extra variables must be an object");

    jinja::RenderOptions options;
    std::vector<std::pair<std::string, jinja::Value>> variables;
    variables.emplace_back("messages", jinja::Value::from_json(inputs.messages));
    variables.emplace_back("tools", jinja::Value::from_json(inputs.tools));
    variables.emplace_back("add_generation_prompt", jinja::Value::boolean(inputs.add_generation_prompt));
    variables.emplace_back("bos_token", jinja::Value::string(inputs.bos_token));
    variables.emplace_back("eos_token", jinja::Value::string(inputs.eos_token));
    for (const auto& [key, value] : inputs.extra.items()) {
      if (key == "strftime_now") {
        if (!value.is_string() || !(options.now = parse_civil_time(value.get_ref<const std::string&>()))) {
          return Status::error(
              "chat template: extra.strftime_now must be a local time \"YYYY-MM-DD[THH:MM[:SS]]\"");
        }
        continue;
      }
      variables.emplace_back(key, jinja::Value::from_json(value));
    }
    return jinja::render_program(*program_, variables, options);
  } catch (const jinja::JinjaError& error) {
    return template_error(error, program_->source);
  } catch (const std::bad_alloc&) {
    return Status::error("chat template: out of memory while rendering");
  } catch (const std::exception& error) {
    return Status::error(std::string("chat template: ") + error.what());
  }
}

const std::string& ChatTemplate::source() const {
  return program_->source;
}

}  // namespace helium
