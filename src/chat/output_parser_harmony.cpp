// chat/output_parser_harmony.cpp — the harmony (GPT-OSS) message parser.
#include "chat/output_parser_harmony.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "chat/output_parser_scan.h"

namespace helium {
namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kConstrain = "<|constrain|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kFunctionsPrefix = "functions.";
// A header is a role, a channel, a recipient and a content type: far below this. Without the bound, a
// stray `<|channel|>` in text would hold back all that follows until the end.
constexpr size_t kMaxHeaderBytes = 512;

// Markers that end a message body: the first three are consumed with it, a new header is not.
constexpr std::array<std::string_view, 5> kBodyEnds = {kEnd, kCall, kReturn, kStart, kChannel};
constexpr size_t kLongestBodyEnd = kChannel.size();

struct MarkerHit {
  size_t pos = std::string_view::npos;
  std::string_view marker;
};

template <size_t N>
MarkerHit find_first_marker(std::string_view text, size_t from, const std::array<std::string_view, N>& markers) {
  MarkerHit hit;
  for (std::string_view marker : markers) {
    size_t pos = text.find(marker, from);
    if (pos < hit.pos) hit = MarkerHit{pos, marker};
  }
  return hit;
}

struct Header {
  std::string channel;
  std::string recipient;
};

// Splits on whitespace.
template <class Fn>
void for_each_word(std::string_view text, Fn&& fn) {
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && output_scan::is_space(text[i])) ++i;
    size_t begin = i;
    while (i < text.size() && !output_scan::is_space(text[i])) ++i;
    if (i > begin) fn(text.substr(begin, i - begin));
  }
}

// Reads `[<|start|>ROLE][ to=R]<|channel|>CHANNEL[ to=R][ [<|constrain|>]TYPE]` (without <|message|>).
std::optional<Header> parse_header(std::string_view text) {
  if (text.starts_with(kStart)) {
    text.remove_prefix(kStart.size());
    size_t role = 0;
    while (role < text.size() && text[role] != '<' && !output_scan::is_space(text[role])) ++role;
    if (role == 0) return std::nullopt;
    text.remove_prefix(role);
  }
  size_t channel_at = text.find(kChannel);
  if (channel_at == std::string_view::npos) return std::nullopt;
  Header header;
  bool valid = true;
  for_each_word(text.substr(0, channel_at), [&](std::string_view word) {
    if (word.starts_with("to=") && header.recipient.empty()) {
      header.recipient = std::string(word.substr(3));
    } else {
      valid = false;
    }
  });
  std::string_view rest = text.substr(channel_at + kChannel.size());
  if (size_t constrain = rest.find(kConstrain); constrain != std::string_view::npos) {
    // The content type after <|constrain|> ("json"): the arguments are read as JSON either way.
    if (rest.substr(constrain + kConstrain.size()).find("<|") != std::string_view::npos) return std::nullopt;
    rest = rest.substr(0, constrain);
  }
  bool first = true;
  for_each_word(rest, [&](std::string_view word) {
    if (word.find("<|") != std::string_view::npos) {
      valid = false;
    } else if (first) {
      header.channel = std::string(word);
    } else if (word.starts_with("to=") && header.recipient.empty()) {
      header.recipient = std::string(word.substr(3));
    }  // else a content type such as "json": the arguments are read as JSON either way
    first = false;
  });
  if (!valid) return std::nullopt;
  if (header.channel != "analysis" && header.channel != "commentary" && header.channel != "final") return std::nullopt;
  return header;
}

class HarmonyParser final : public ContentParser {
 public:
  explicit HarmonyParser(const ToolSet& tools) : tools_(tools) {}

  void feed(std::string_view chunk, ContentSink& sink) override {
    pending_.append(chunk);
    drain(sink, /*at_end=*/false);
  }

  void finish(ContentSink& sink) override { drain(sink, /*at_end=*/true); }

 private:
  enum class State { kBetween, kHeader, kBody };
  enum class BodyKind { kReasoningText, kAnswerText, kToolCall };

  void drain(ContentSink& sink, bool at_end) {
    const std::string_view pending = pending_;
    size_t pos = 0;
    bool progressing = true;
    while (progressing) {
      switch (state_) {
        case State::kBetween:
          progressing = drain_between(pending, pos, at_end, sink);
          break;
        case State::kHeader:
          progressing = drain_header(pending, pos, at_end, sink);
          break;
        case State::kBody:
          progressing = body_kind_ == BodyKind::kToolCall ? drain_call_body(pending, pos, at_end, sink)
                                                      : drain_streamed_body(pending, pos, at_end, sink);
          break;
      }
    }
    pending_.erase(0, pos);
  }

  // Each drain_* step consumes from pending[pos...] and returns whether another step may progress.
  bool drain_between(std::string_view pending, size_t& pos, bool at_end, ContentSink& sink) {
    MarkerHit hit = find_first_marker(pending, pos, std::array<std::string_view, 2>{kStart, kChannel});
    if (hit.pos == std::string_view::npos) {
      std::string_view rest = pending.substr(pos);
      size_t keep = at_end ? 0 : output_scan::partial_tag_suffix(rest, {kStart, kChannel});
      emit(sink, BodyKind::kAnswerText, rest.substr(0, rest.size() - keep));
      pos = pending.size() - keep;
      return false;
    }
    emit(sink, BodyKind::kAnswerText, pending.substr(pos, hit.pos - pos));
    pos = hit.pos;
    state_ = State::kHeader;
    return true;
  }

  bool drain_header(std::string_view pending, size_t& pos, bool at_end, ContentSink& sink) {
    std::string_view header = pending.substr(pos);
    const std::string_view opener = header.starts_with(kStart) ? kStart : kChannel;
    size_t message = header.find(kMessage);
    // A second header start (other than the channel after the role) or a body end inside the header
    // means this is not a header.
    size_t bound = message == std::string_view::npos ? header.size() : message;
    MarkerHit stray = find_first_marker(header.substr(0, bound), opener.size(),
                                        std::array<std::string_view, 4>{kEnd, kCall, kReturn, kStart});
    std::optional<Header> parsed;
    if (stray.pos == std::string_view::npos) {
      if (message == std::string_view::npos) {
        if (!at_end && header.size() <= kMaxHeaderBytes) return false;  // wait for <|message|>
      } else {
        parsed = parse_header(header.substr(0, message));
      }
    }
    if (!parsed) {
      emit(sink, BodyKind::kAnswerText, opener);  // fail closed: the marker is text, the rest is read again
      pos += opener.size();
      state_ = State::kBetween;
      return true;
    }
    header_raw_ = std::string(header.substr(0, message + kMessage.size()));
    recipient_ = parsed->recipient;
    body_kind_ = !parsed->recipient.empty()       ? BodyKind::kToolCall
                 : parsed->channel == "analysis" ? BodyKind::kReasoningText
                                                  : BodyKind::kAnswerText;
    pos += message + kMessage.size();
    call_scan_from_ = 0;
    state_ = State::kBody;
    return true;
  }

  bool drain_streamed_body(std::string_view pending, size_t& pos, bool at_end, ContentSink& sink) {
    std::string_view body = pending.substr(pos);
    MarkerHit end = find_first_marker(body, 0, kBodyEnds);
    if (end.pos == std::string_view::npos) {
      size_t keep = at_end ? 0 : output_scan::partial_tag_suffix(body, {kEnd, kCall, kReturn, kStart, kChannel});
      emit(sink, body_kind_, body.substr(0, body.size() - keep));
      pos = pending.size() - keep;
      if (at_end) state_ = State::kBetween;
      return false;
    }
    emit(sink, body_kind_, body.substr(0, end.pos));
    pos += end.pos + (consumes(end.marker) ? end.marker.size() : 0);
    state_ = State::kBetween;
    return true;
  }

  bool drain_call_body(std::string_view pending, size_t& pos, bool at_end, ContentSink& sink) {
    std::string_view body = pending.substr(pos);
    MarkerHit end = find_first_marker(body, call_scan_from_, kBodyEnds);
    size_t body_length = end.pos;
    size_t end_length = consumes(end.marker) ? end.marker.size() : 0;
    if (end.pos == std::string_view::npos) {
      if (!at_end) {
        call_scan_from_ = body.size() - std::min(body.size(), kLongestBodyEnd - 1);
        return false;
      }
      body_length = body.size();  // the stop token <|call|> ended the output
      end_length = 0;
    }
    std::string raw = header_raw_ + std::string(body.substr(0, body_length + end_length));
    std::optional<ParsedToolCall> call = read_call(body.substr(0, body_length));
    if (call) {
      call->raw = std::move(raw);
      sink.on_tool_call(std::move(*call));
    } else {
      emit(sink, BodyKind::kAnswerText, raw);
    }
    pos += body_length + end_length;
    state_ = State::kBetween;
    return true;
  }

  std::optional<ParsedToolCall> read_call(std::string_view body) const {
    std::string_view name = recipient_;
    if (name.starts_with(kFunctionsPrefix)) name.remove_prefix(kFunctionsPrefix.size());
    if (name.empty() || !tools_.accepts(name)) return std::nullopt;
    std::optional<nlohmann::ordered_json> arguments = parse_json_text(body);
    if (!arguments || !arguments->is_object()) return std::nullopt;
    return ParsedToolCall{std::string(name), dump_compact_json(*arguments), {}};
  }

  static bool consumes(std::string_view marker) { return marker == kEnd || marker == kCall || marker == kReturn; }

  static void emit(ContentSink& sink, BodyKind kind, std::string_view text) {
    if (text.empty()) return;
    if (kind == BodyKind::kReasoningText) {
      sink.on_reasoning(text);
    } else {
      sink.on_text(text);
    }
  }

  const ToolSet& tools_;
  State state_ = State::kBetween;
  std::string pending_;      // bytes not yet resolved
  std::string header_raw_;   // the current message's header through <|message|>
  std::string recipient_;    // the current message's recipient, empty if none
  BodyKind body_kind_ = BodyKind::kAnswerText;
  size_t call_scan_from_ = 0;  // where the search for the end of a held call body resumes
};

}  // namespace

std::unique_ptr<ContentParser> make_harmony_parser(const ToolSet& tools) { return std::make_unique<HarmonyParser>(tools); }

}  // namespace helium
