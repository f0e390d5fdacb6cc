#include "batching/session_table.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/check.h"

namespace cellm {
namespace {

std::string input_name(size_t index, SessionId session) {
  return "batch input " + std::to_string(index) + " (session " + std::to_string(session) + ")";
}

// A session's place while pack walks the batch.
struct Walk {
  SessionId session = 0;
  SeqId seq = 0;
  int32_t start = 0;  // where its first input starts: its length after the rewind, if any
  int64_t next = 0;   // where its next input must start
  bool rewinds = false;
};

}  // namespace

Status validate_session_table_config(const SessionTableConfig& config) {
  if (config.max_sessions < 1) {
    return invalid_argument("max_sessions is " + std::to_string(config.max_sessions) +
                            "; it must be at least 1");
  }
  if (config.max_session_tokens < 1) {
    return invalid_argument("max_session_tokens is " + std::to_string(config.max_session_tokens) +
                            "; it must be at least 1");
  }
  if (config.vocab_size < 1) {
    return invalid_argument("vocab_size is " + std::to_string(config.vocab_size) +
                            "; it must be at least 1");
  }
  return ok_status();
}

SessionTable::SessionTable(CellCache& cache, const SessionTableConfig& config)
    : cache_(cache), config_(config) {
  const Status status = validate_session_table_config(config);
  CELLM_CHECK(status.ok()) << "SessionTable: " << status.message();
}

StatusOr<int32_t> SessionTable::length(SessionId id) const {
  const auto it = sessions_.find(id);
  if (it == sessions_.end()) return not_found("session " + std::to_string(id) + " is not open");
  return cache_.pos(it->second);
}

StatusOr<std::span<const int32_t>> SessionTable::cells(SessionId id) const {
  const auto it = sessions_.find(id);
  if (it == sessions_.end()) return not_found("session " + std::to_string(id) + " is not open");
  return cache_.cells(it->second);
}

void SessionTable::commit() {
  if (cache_.num_holders() > 0) cache_.release_held();
}

std::optional<SessionId> SessionTable::open() {
  commit();
  if (num_sessions() >= config_.max_sessions) return std::nullopt;
  const SessionId id = next_id_++;
  sessions_.emplace(id, cache_.seq_new());
  return id;
}

Status SessionTable::close(SessionId id) {
  commit();
  const auto it = sessions_.find(id);
  if (it == sessions_.end())
    return not_found("close: session " + std::to_string(id) + " is not open");
  cache_.seq_rm(it->second);
  sessions_.erase(it);
  return ok_status();
}

StatusOr<SessionId> SessionTable::clone(SessionId src, int32_t upto) {
  commit();
  const auto it = sessions_.find(src);
  if (it == sessions_.end()) {
    return not_found("clone: session " + std::to_string(src) + " is not open");
  }
  const int32_t length = cache_.pos(it->second);
  if (upto < 0 || upto > length) {
    return out_of_range("clone: upto " + std::to_string(upto) + " outside [0, " +
                        std::to_string(length) + "], the length of session " + std::to_string(src));
  }
  if (num_sessions() >= config_.max_sessions) {
    return resource_exhausted("clone: " + std::to_string(config_.max_sessions) +
                              " sessions are open, the most allowed");
  }
  const SessionId id = next_id_++;
  sessions_.emplace(id, cache_.seq_clone(it->second, upto));
  return id;
}

Status SessionTable::rewind(SessionId id, int32_t pos) {
  commit();
  const auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    return not_found("rewind: session " + std::to_string(id) + " is not open");
  }
  const int32_t length = cache_.pos(it->second);
  if (pos < 0 || pos > length) {
    return out_of_range("rewind: position " + std::to_string(pos) + " outside [0, " +
                        std::to_string(length) + "], the length of session " + std::to_string(id));
  }
  cache_.rewind(it->second, pos);
  return ok_status();
}

StatusOr<PackedStep> SessionTable::pack(const BatchInput& batch) {
  CELLM_CHECK(!cache_.has_declared_step()) << "pack while a step is declared in the cache";
  commit();  // the previous step, if its executor did not
  // Validate everything first; nothing below changes the table or the cache until `walks` is
  // complete and the pool check passed.
  std::vector<Walk> walks;
  std::unordered_map<SessionId, size_t> walk_of;
  int64_t num_tokens = 0;
  for (size_t i = 0; i < batch.inputs.size(); ++i) {
    const StepInput& input = batch.inputs[i];
    const auto session = sessions_.find(input.session);
    if (session == sessions_.end()) return not_found(input_name(i, input.session) + ": not open");
    const int64_t payload = static_cast<int64_t>(input.tokens.size());
    if (input.start_pos < 0) {
      return invalid_argument(input_name(i, input.session) + ": negative start position " +
                              std::to_string(input.start_pos));
    }
    if (input.begin < 0 || input.end <= input.begin || input.end > payload) {
      return invalid_argument(input_name(i, input.session) + ": slice [" +
                              std::to_string(input.begin) + ", " + std::to_string(input.end) +
                              ") is empty or outside its payload of " + std::to_string(payload) +
                              " tokens");
    }
    for (int32_t t = input.begin; t < input.end; ++t) {
      if (input.tokens[t] < 0 || input.tokens[t] >= config_.vocab_size) {
        return invalid_argument(input_name(i, input.session) + ": token " +
                                std::to_string(input.tokens[t]) + " at payload index " +
                                std::to_string(t) + " is outside the vocabulary [0, " +
                                std::to_string(config_.vocab_size) + ")");
      }
    }
    if (input.num_top_logprobs < -1 || input.num_top_logprobs > kMaxTopLogprobs ||
        input.scored_token < kNoToken || input.scored_token >= config_.vocab_size) {
      return invalid_argument(input_name(i, input.session) + ": log-probabilities of " +
                              std::to_string(input.num_top_logprobs) +
                              " top tokens (-1 or at most " + std::to_string(kMaxTopLogprobs) +
                              ") or scored token " + std::to_string(input.scored_token) +
                              " outside the vocabulary");
    }
    if (!(input.candidates_temperature >= 0.0f && std::isfinite(input.candidates_temperature))) {
      return invalid_argument(input_name(i, input.session) +
                              ": sampling candidates at temperature " +
                              std::to_string(input.candidates_temperature) +
                              " (0 for none, or a finite temperature above 0)");
    }
    const int64_t first = static_cast<int64_t>(input.start_pos) + input.begin;
    const int64_t last = static_cast<int64_t>(input.start_pos) + input.end;  // one past
    auto [walk_it, is_first] = walk_of.emplace(input.session, walks.size());
    if (is_first) {
      const int32_t length = cache_.pos(session->second);
      if (first > length) {
        return invalid_argument(input_name(i, input.session) + ": starts at position " +
                                std::to_string(first) + ", past the session's length " +
                                std::to_string(length) + " (a gap)");
      }
      walks.push_back(
          {input.session, session->second, static_cast<int32_t>(first), first, first < length});
    } else {
      const Walk& walk = walks[walk_it->second];
      if (first != walk.next) {
        return invalid_argument(input_name(i, input.session) + ": starts at position " +
                                std::to_string(first) + " but the session's previous input ends" +
                                " at " + std::to_string(walk.next) +
                                (first < walk.next ? " (an overlap)" : " (a gap)"));
      }
    }
    if (last > config_.max_session_tokens) {
      return out_of_range(input_name(i, input.session) + ": runs to position " +
                          std::to_string(last) + ", past max_session_tokens " +
                          std::to_string(config_.max_session_tokens));
    }
    walks[walk_it->second].next = last;
    num_tokens += input.end - input.begin;
  }
  if (num_tokens > cache_.num_free()) {
    return resource_exhausted("batch of " + std::to_string(num_tokens) + " tokens does not fit " +
                              "the cell pool: " + std::to_string(cache_.num_free()) +
                              " cells free of " + std::to_string(cache_.max_cells()) +
                              " (cells the batch's own rewinds drop stay held until it commits)");
  }

  // Valid: apply the rewinds (held, so that rollback can undo them), then pack.
  for (const Walk& walk : walks) {
    if (walk.rewinds) cache_.rewind_held(walk.seq, walk.start);
  }
  PackedStep step;
  step.num_tokens = static_cast<int32_t>(num_tokens);  // <= num_free, so it fits
  step.tokens.reserve(num_tokens);
  step.positions.reserve(num_tokens);
  step.seq_ids.reserve(num_tokens);
  step.sessions.reserve(num_tokens);
  for (size_t i = 0; i < batch.inputs.size(); ++i) {
    const StepInput& input = batch.inputs[i];
    const SeqId seq = walks[walk_of.at(input.session)].seq;
    for (int32_t t = input.begin; t < input.end; ++t) {
      step.tokens.push_back(input.tokens[t]);
      step.positions.push_back(input.start_pos + t);
      step.seq_ids.push_back(seq);
      step.sessions.push_back(input.session);
    }
    if (input.wants_output) {
      step.kept_rows.push_back(
          {static_cast<int32_t>(step.tokens.size()) - 1, static_cast<int32_t>(i), input.session});
    }
  }
  for (const Walk& walk : walks)
    step.session_starts.push_back({walk.session, walk.seq, walk.start});
  return step;
}

void SessionTable::rollback(const PackedStep& step) {
  for (const SessionStart& start : step.session_starts) {
    const auto it = sessions_.find(start.session);
    if (it == sessions_.end() || it->second != start.seq) continue;
    cache_.rewind(start.seq, start.pos);
    if (!cache_.held_cells(start.seq).empty()) cache_.restore_held(start.seq);
  }
}

}  // namespace cellm
