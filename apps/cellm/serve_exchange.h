// ServeExchange: one HTTP request's generations (a Runner session and a generation per choice)
// and what goes back of them: the whole response once every choice has ended, or, streamed, the
// server-sent events each delivery makes.
//
// Knows no sockets: the server writes what it returns, and ends the exchange when its client goes
// away. Choice k generates from prompt k / n with its own GenConfig; its sessions close when the
// exchange ends, so prefix reuse keeps them as retained prefixes. Who calls it: serve_http.cpp.
// Thread-safety: one thread at a time (the request's worker); the Runner's engine thread only
// feeds it through the generations' callbacks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "batching/runner.h"
#include "core/status.h"
#include "serve_api.h"
#include "serve_reasoning.h"
#include "serve_tools.h"

namespace cellm::app {

// The bytes a token id decodes to (TextCodec::token_piece): log-probabilities name tokens so.
using TokenPieceFn = std::function<std::string(int32_t)>;

class ServeExchange {
 public:
  // Opens a session per choice and starts its generation: `prompts[k / request.n]` with
  // `configs[k]`. `header` gives the response's id, time, model and prompts' token ids.
  ServeExchange(Runner& runner, ServeRequest request, ServeResult header,
                std::vector<GenConfig> configs, TokenPieceFn token_piece);
  ServeExchange(const ServeExchange&) = delete;
  ServeExchange& operator=(const ServeExchange&) = delete;
  ~ServeExchange();  // end()

  const ServeRequest& request() const { return request_; }

  // Waits up to `timeout` for every choice to end; true when all have.
  bool wait_all(std::chrono::milliseconds timeout);
  // Once every choice has ended: the response, or the first failure (refused at submit:
  // InvalidArgument; later: Internal; cancelled while `stopping`: Cancelled).
  StatusOr<nlohmann::ordered_json> whole_response(bool stopping);
  // Streamed: waits up to `timeout` for news and returns the events it makes (maybe none). Sets
  // `done` when they end with "data: [DONE]" (every choice ended, or one failed).
  std::string next_events(std::chrono::milliseconds timeout, bool& done);

  // Asks every running choice to end (kCancelled).
  void cancel();
  // cancel(), then closes the sessions. Idempotent.
  void end();

 private:
  struct Delivery;  // what the engine delivered and the server has not sent yet, per choice

  Status failure_of(size_t choice) const;
  // The text choice `k` delivered, through its reasoning and tool-call streams: the thinking and
  // the content that can be shown now (`last`: all that is left, and the calls).
  ReasoningStream::Pieces take_text(size_t k, std::string_view delta, bool last);
  // `logprobs` with each token id turned into its piece, appended to choice `k`'s.
  void add_logprobs(size_t k, const std::vector<TokenLogprobs>& logprobs);
  // With echo: an entry per prompt token of choice `k` (the first without a log-probability,
  // then `prompt_logprobs`), appended to its entries.
  void add_prompt_logprobs(size_t k, const std::vector<TokenLogprobs>& prompt_logprobs);

  ServeRequest request_;
  TokenPieceFn token_piece_;
  ServeResult result_;  // choices filled as they are sent (streamed) or at the end (whole)
  std::vector<Session> sessions_;
  std::vector<GenerationHandle> handles_;
  std::shared_ptr<Delivery> delivery_;
  std::vector<bool> first_sent_;                    // per choice: its first event went out
  std::vector<bool> final_sent_;                    // per choice: its last chunk went out
  std::vector<bool> echoed_;                        // per choice: its prompt's text went out (echo)
  std::vector<size_t> logprobs_sent_;               // per choice: entries of its logprobs sent
  std::vector<ToolCallStream> tool_streams_;        // per choice where the request reads tool calls
  std::vector<ReasoningStream> reasoning_streams_;  // per choice with a reasoning parser
  bool ended_ = false;
};

}  // namespace cellm::app
