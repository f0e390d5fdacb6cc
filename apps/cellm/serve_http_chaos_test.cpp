// The HTTP server end to end on stories260K (with a chat template), randomized: a dozen clients
// at once, each sending a few completions or chat completions requests of random shape — text or
// token prompts, one or two prompts, one or two choices each, greedy or seeded sampling, stop
// strings, log-probabilities, echo, whole or streamed — through 2-8 generation slots or all 16
// sessions the engine holds, some clients hanging up part-way through a stream. Every request
// answered in full gets, choice by choice, the text, token ids and finish reason (and, whole, the
// log-probabilities and usage) the same request gets alone on the idle server afterwards; a
// refusal (more choices than slots) is the same refusal; the server ends with nothing running and
// goes on answering. The workload is a function of the seed; the interleaving is not, and the
// oracle does not depend on it. CELLM_CHAOS_SEEDS=N runs seeds 1..N (a soak); CI runs 3, and 1
// under TSan.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

#include "chaos_workload.h"
#include "sanitizers.h"
#include "serve_http_test_util.h"

namespace cellm::app::http_test {
namespace {

using namespace std::chrono_literals;
using testing::chaos::chance;
using testing::chaos::uniform;

// Under ThreadSanitizer a seed takes a minute or so: the TSan job runs one.
constexpr int kDefaultSeeds = testing::kThreadSanitizer ? 1 : 3;

// A prompt: a text (some sharing a long first part, for prefix reuse) or token ids.
Json random_prompt(std::mt19937& rng, bool as_ids) {
  static const char* const kStarts[] = {"Once upon a time", "Lily went to the park",
                                        "The little dog was sad", "Tom and his mom"};
  const std::string shared =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun";
  if (as_ids) {
    Json ids = Json::array({1});
    for (int i = uniform(rng, 1, 30); i > 0; --i) ids.push_back(uniform(rng, 3, 511));
    return ids;
  }
  if (chance(rng, 0.5)) return kStarts[uniform(rng, 0, 3)];
  return shared + std::string(uniform(rng, 0, 3), '.') + (chance(rng, 0.5) ? " One day" : "");
}

// A conversation: one of two system prompts (shared: prefix reuse), a user turn, at times an
// earlier exchange.
Json random_messages(std::mt19937& rng) {
  static const char* const kSystems[] = {"You tell short stories to children.", "You are terse."};
  Json messages = Json::array();
  messages.push_back({{"role", "system"}, {"content", kSystems[uniform(rng, 0, 1)]}});
  if (chance(rng, 0.3)) {
    messages.push_back({{"role", "user"}, {"content", random_prompt(rng, false)}});
    messages.push_back({{"role", "assistant"}, {"content", "She smiled."}});
  }
  messages.push_back({{"role", "user"}, {"content", random_prompt(rng, false)}});
  return messages;
}

// A completions or chat completions request (`chat`) of random shape.
Json random_request(std::mt19937& rng, bool chat) {
  Json request = {{"max_tokens", uniform(rng, 1, 40)}, {"return_token_ids", true}};
  const bool as_ids = chance(rng, 0.3);
  if (chat) {
    request["messages"] = random_messages(rng);
  } else {
    request["prompt"] = chance(rng, 0.2)
                            ? Json::array({random_prompt(rng, as_ids), random_prompt(rng, as_ids)})
                            : random_prompt(rng, as_ids);
  }
  if (chance(rng, 0.5)) {
    request["temperature"] = 0;
  } else {
    request["temperature"] = std::uniform_real_distribution<double>(0.6, 1.2)(rng);
    request["seed"] = uniform(rng, 0, 1 << 30);
    if (chance(rng, 0.5)) request["top_k"] = uniform(rng, 1, 40);
    if (chance(rng, 0.3)) request["top_p"] = 0.9;
    if (chance(rng, 0.3)) request["n"] = 2;
  }
  if (chance(rng, 0.2)) request["repetition_penalty"] = 1.3;
  if (chance(rng, 0.2)) request["stop"] = Json::array({chance(rng, 0.5) ? "." : " the"});
  if (chance(rng, 0.2)) {
    if (chat) {
      request["logprobs"] = true;
      request["top_logprobs"] = uniform(rng, 0, 3);
    } else {
      request["logprobs"] = uniform(rng, 0, 3);
    }
  }
  if (!chat && chance(rng, 0.1)) request["echo"] = true;
  if (chance(rng, 0.2)) request["ignore_eos"] = true;
  return request;
}

// What a client saw of one choice.
struct Choice {
  std::string text;
  std::vector<int32_t> token_ids;
  std::string finish_reason;
  Json logprobs;  // whole responses only
};

struct Outcome {
  std::string path;  // /v1/completions or /v1/chat/completions
  Json request;
  bool streamed = false;
  bool hung_up = false;
  int status = -1;
  std::map<int, Choice> choices;  // by index
  Json usage;                     // whole responses only
  Json error;                     // the body of a refusal
};

std::map<int, Choice> whole_choices(const Json& body) {
  std::map<int, Choice> choices;
  for (const Json& c : body.at("choices")) {
    Choice& choice = choices[c.at("index").get<int>()];
    choice.text = c.contains("message") ? c.at("message").at("content") : c.at("text");
    choice.token_ids = c.at("token_ids").get<std::vector<int32_t>>();
    choice.finish_reason = c.at("finish_reason");
    choice.logprobs = c.at("logprobs");
  }
  return choices;
}

// `may_be_cut`: the server may stop while the request runs, so a stream may end early.
Outcome send(const Served& served, const std::string& path, const Json& request, bool stream,
             int hang_up_after_events, bool may_be_cut) {
  Outcome outcome;
  outcome.path = path;
  outcome.request = request;
  outcome.streamed = stream;
  if (!stream) {
    const Reply reply = post(served, path, request);
    outcome.status = reply.status;
    if (reply.status == 200) {
      outcome.choices = whole_choices(reply.body);
      outcome.usage = reply.body.at("usage");
    } else {
      outcome.error = reply.body;
    }
    return outcome;
  }
  Json streamed = request;
  streamed["stream"] = true;
  std::string bytes;
  int num_events = 0;
  const int status = post_receiving(
      served, streamed,
      [&](std::string_view data) {
        bytes.append(data);
        num_events = static_cast<int>(sse_payloads(bytes).size());
        if (hang_up_after_events > 0 && num_events >= hang_up_after_events) {
          outcome.hung_up = true;
          return false;
        }
        return true;
      },
      path);
  if (outcome.hung_up) return outcome;
  outcome.status = status;
  if (status != 200) {
    outcome.error = Json::parse(bytes, nullptr, false);
    return outcome;
  }
  const std::vector<std::string> payloads = sse_payloads(bytes);
  if (payloads.empty() || payloads.back() != "[DONE]") {
    if (!may_be_cut) ADD_FAILURE() << "a stream that did not end with [DONE]: " << bytes;
    outcome.status = -1;
    return outcome;
  }
  for (size_t i = 0; i + 1 < payloads.size(); ++i) {
    const Json event = Json::parse(payloads[i]);
    for (const Json& c : event.at("choices")) {
      Choice& choice = outcome.choices[c.at("index").get<int>()];
      if (c.contains("delta")) {
        choice.text += c.at("delta").value("content", std::string());
      } else {
        choice.text += c.at("text").get<std::string>();
      }
      for (const int32_t id : c.at("token_ids")) choice.token_ids.push_back(id);
      if (!c.at("finish_reason").is_null()) choice.finish_reason = c.at("finish_reason");
    }
  }
  return outcome;
}

constexpr int kClients = 12;

// Twelve clients' requests (the seed's), sent at once to `served`; with `stop_after_ms` >= 0 the
// server is stopped that long after they start.
std::vector<std::vector<Outcome>> run_clients(Served& served, uint32_t seed,
                                              int stop_after_ms = -1) {
  std::vector<std::vector<Outcome>> outcomes(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      std::mt19937 client_rng(seed * 1000 + i);
      for (int r = uniform(client_rng, 1, 4); r > 0; --r) {
        const bool chat = chance(client_rng, 0.3);
        const Json request = random_request(client_rng, chat);
        const bool stream = chance(client_rng, 0.5);
        const int hang_up = stream && chance(client_rng, 0.25) ? uniform(client_rng, 1, 6) : 0;
        outcomes[i].push_back(send(served, chat ? "/v1/chat/completions" : "/v1/completions",
                                   request, stream, hang_up, stop_after_ms >= 0));
      }
    });
  }
  if (stop_after_ms >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(stop_after_ms));
    served.server().stop();
  }
  for (std::thread& client : clients) client.join();
  return outcomes;
}

struct Tally {
  int answered = 0, chats = 0, refused = 0, hung_up = 0, unanswered = 0;
};

// Each request answered in full gets, choice by choice, what it gets alone on `oracle` (idle); a
// refusal is the same refusal. `cut`: requests the stop ended (no status, a cut stream, 503) are
// counted, not compared, and a choice it ended ("cancelled") holds the first part of its tokens.
Tally expect_as_alone(const std::vector<std::vector<Outcome>>& outcomes, const Served& oracle,
                      bool cut) {
  Tally tally;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    for (size_t r = 0; r < outcomes[i].size(); ++r) {
      const Outcome& got = outcomes[i][r];
      SCOPED_TRACE("client " + std::to_string(i) + ", request " + std::to_string(r) + ": " +
                   (got.streamed ? "streamed " : "whole ") + got.path + " " + got.request.dump());
      if (got.hung_up) {
        ++tally.hung_up;
        continue;
      }
      if (cut && (got.status == -1 || got.status == 503)) {
        ++tally.unanswered;
        continue;
      }
      const Reply alone = post(oracle, got.path, got.request);
      EXPECT_EQ(got.status, alone.status) << alone.body.dump();
      if (got.status != alone.status) continue;
      if (got.status != 200) {  // refused alone too (more choices than slots): for the same reason
        EXPECT_EQ(got.error, alone.body);
        ++tally.refused;
        continue;
      }
      ++tally.answered;
      tally.chats += got.path == "/v1/chat/completions";
      const std::map<int, Choice> want = whole_choices(alone.body);
      EXPECT_EQ(got.choices.size(), want.size());
      for (const auto& [index, choice] : want) {
        SCOPED_TRACE("choice " + std::to_string(index));
        if (!got.choices.contains(index)) continue;
        const Choice& mine = got.choices.at(index);
        if (cut && mine.finish_reason == "cancelled") {  // ended by the stop: the first part
          const std::vector<int32_t> first_part(
              choice.token_ids.begin(),
              choice.token_ids.begin() +
                  static_cast<ptrdiff_t>(std::min(mine.token_ids.size(), choice.token_ids.size())));
          EXPECT_EQ(mine.token_ids, first_part);
          if (!got.request.contains("stop")) {  // else its text may hold a partial stop string
            EXPECT_EQ(mine.text, choice.text.substr(0, mine.text.size()));
          }
          continue;
        }
        EXPECT_EQ(mine.token_ids, choice.token_ids);
        EXPECT_EQ(mine.text, choice.text);
        EXPECT_EQ(mine.finish_reason, choice.finish_reason);
        if (!got.streamed) {
          EXPECT_EQ(mine.logprobs, choice.logprobs);
        }
      }
      if (!got.streamed) {
        EXPECT_EQ(got.usage, alone.body.at("usage"));
      }
    }
  }
  return tally;
}

// Up to the 16 sessions Served holds: at 16 retained prefixes give way at the session limit.
int random_slots(std::mt19937& rng) { return chance(rng, 0.25) ? 16 : uniform(rng, 2, 8); }

class ServeHttpChaosTest : public ::testing::TestWithParam<int> {};

TEST_P(ServeHttpChaosTest, EveryAnsweredRequestGetsWhatItGetsAloneWhateverTheInterleaving) {
  const auto seed = static_cast<uint32_t>(GetParam());
  std::mt19937 rng(seed);
  const int max_concurrent = random_slots(rng);
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(max_concurrent) + " slots");
  Served served(max_concurrent, stories_with_chat_template());
  const std::vector<std::vector<Outcome>> outcomes = run_clients(served, seed);

  Json server;  // hung-up generations end at their next event: wait for the engine to drain
  for (int i = 0; i < 400; ++i) {
    server = get(served, "/metrics.json").body.at("server");
    if (server.at("running_generations") == 0) break;
    std::this_thread::sleep_for(25ms);
  }
  EXPECT_EQ(server.at("running_generations"), 0) << server.dump();

  const Tally tally = expect_as_alone(outcomes, served, /*cut=*/false);
  EXPECT_GT(tally.answered, 0);
  std::printf("seed %u: %d slots, %d requests answered (%d chats), %d refused, %d hung up\n", seed,
              max_concurrent, tally.answered, tally.chats, tally.refused, tally.hung_up);
  EXPECT_EQ(get(served, "/health").status, 200) << "the server goes on";
}

// The same traffic, the server stopped 10-300 ms in: every client returns, and every request
// answered in full before the stop still got what it gets alone (on another server).
TEST_P(ServeHttpChaosTest, AStopMidTrafficEndsEveryRequestAndTheAnsweredOnesAreWhole) {
  const auto seed = static_cast<uint32_t>(GetParam());
  std::mt19937 rng(seed);
  const int max_concurrent = random_slots(rng);
  const int stop_after_ms = uniform(rng, 10, 300);
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(max_concurrent) +
               " slots, stopped after " + std::to_string(stop_after_ms) + " ms");
  std::vector<std::vector<Outcome>> outcomes;
  {
    Served served(max_concurrent, stories_with_chat_template());
    outcomes = run_clients(served, seed, stop_after_ms);
  }  // serve() has returned and the runner shut down
  const Served oracle(max_concurrent, stories_with_chat_template());
  const Tally tally = expect_as_alone(outcomes, oracle, /*cut=*/true);
  std::printf("seed %u (stopped after %d ms): %d answered, %d refused, %d hung up, %d cut\n", seed,
              stop_after_ms, tally.answered, tally.refused, tally.hung_up, tally.unanswered);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ServeHttpChaosTest,
                         ::testing::Range(1, 1 + testing::chaos::num_seeds(kDefaultSeeds)));

}  // namespace
}  // namespace cellm::app::http_test
