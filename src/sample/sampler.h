// sample/sampler.h — logits row -> token, one deterministic function for plain decoding and for
// speculative verification alike.
// Owns: sampling settings, penalties, logit bias, temperature / top-k / top-p / min-p, the inverse-CDF
// draw with a given uniform number, and stop-string matching. Must not: keep any random state (the
// caller passes u = philox_uniform(seed, position)).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace helium {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  // Hugging Face's repetition penalty over the prompt and the output (>1 discourages repeats).
  float repetition_penalty = 1.0f;
  // OpenAI's penalties over the output tokens: logit -= presence * [count > 0] + frequency * count.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logit of a token id
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f || top_k == 1; }
  // Greedy on the raw logits (no penalty or bias changes them): the token is their argmax, lowest id on
  // ties, which a backend can take where the logits are (Backend::argmax_rows).
  bool plain_greedy() const { return greedy() && plain(); }
  // Sampling on the raw logits with top_k off or at most max_top_k: a backend can select the row's best
  // candidates where the logits are, and with top_k the token depends on nothing else; without it the
  // draw also needs the row's softmax total, and a draw that reaches past the best max_top_k needs the
  // logits after all (sample_from_candidates returns -1).
  bool device_candidates(int max_top_k) const { return !greedy() && top_k <= max_top_k && plain(); }
  // No penalty or bias changes the logits.
  bool plain() const {
    return repetition_penalty == 1.0f && presence_penalty == 0.0f && frequency_penalty == 0.0f && logit_bias.empty();
  }
};

// Validates the settings against a vocabulary; the message names the bad field.
std::string validate_sampling(const SamplingParams& params, int64_t vocab_size);

// Reusable scratch space so that sampling does not allocate per token.
struct SamplerScratch {
  std::vector<float> logits;
  std::vector<std::pair<float, int32_t>> candidates;
  std::vector<std::pair<float, int32_t>> sort_buffer;
  std::vector<double> term_of_id;  // softmax terms by token id (only the candidates' are set)
  std::vector<int32_t> ids;
  std::vector<int32_t> counts;
};

// Picks the token for one logits row. `context` is the prompt followed by the output so far; the last
// `output_len` of it are output tokens. `u` in [0, 1) selects from the final distribution by inverse
// CDF over candidates ordered by (probability desc, id asc); the softmax is the one sampler.cpp defines
// (version 2: exp_det terms, their total in core/softmax_terms.h's tree). Greedy: the highest logit, lowest id
// on ties.
int32_t sample_token(std::span<const float> logits, const SamplingParams& params, std::span<const int32_t> context,
                     size_t output_len, double u, SamplerScratch& scratch);

// A set of one row's sampling candidates, selected where its logits are (Backend::select_candidates):
// x[i] = logit / temperature of token ids[i] (x and ids of one size), every candidate ranked among the
// row's best `best` (in the candidate order, x desc then id asc) in it, in any order, possibly more.
struct RowCandidates {
  std::span<const float> x;
  std::span<const int32_t> ids;
  int64_t valid = 0;  // the row's number of logits > -inf
  int64_t best = 0;
  double total = 0;   // the row's softmax_total (core/softmax_terms.h); needed unless top_k <= best
};

// sample_token for a row whose logits are not at hand, from its candidates, for settings that pass
// SamplingParams::device_candidates(set.best): the token sample_token returns on the whole row with the
// same u, or -1 when the draw needs candidates ranked past the set's best (top_k off and a top_p set, a
// min_p run or u's place in the distribution beyond them): then sample_token on the logits decides.
int32_t sample_from_candidates(const RowCandidates& set, const SamplingParams& params, double u, int32_t vocab_size,
                               SamplerScratch& scratch);

// Finds stop strings in streamed text. feed() appends text and returns how many bytes of the text so far
// are safe to emit (they cannot become part of a stop string); once a stop string is found, stopped()
// is true and the safe length ends before the match.
class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  size_t feed(std::string_view text);
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }
  const std::string& text() const { return text_; }

 private:
  std::vector<std::string> stops_;
  std::string text_;
  bool stopped_ = false;
  std::string matched_;
  size_t match_at_ = 0;
};

}  // namespace helium
