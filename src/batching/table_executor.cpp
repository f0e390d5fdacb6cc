#include "batching/table_executor.h"

#include <span>
#include <string>
#include <utility>

#include "core/check.h"

namespace cellm {

TableExecutor::TableExecutor(std::string name) : name_(std::move(name)) {}

TableExecutor::~TableExecutor() = default;

void TableExecutor::check_sessions() const {
  CELLM_CHECK(table_ != nullptr) << name_ << " used before initialize()";
}

void TableExecutor::create_sessions(int32_t max_cells, const SessionTableConfig& config) {
  CELLM_CHECK(table_ == nullptr) << name_ << ": sessions created twice";
  cache_ = std::make_unique<CellCache>(max_cells);
  table_ = std::make_unique<SessionTable>(*cache_, config);
}

CellCache& TableExecutor::cache() {
  check_sessions();
  return *cache_;
}

const CellCache& TableExecutor::cache() const {
  check_sessions();
  return *cache_;
}

SessionTable& TableExecutor::table() {
  check_sessions();
  return *table_;
}

CacheUsage TableExecutor::cache_usage() const {
  check_sessions();
  return {cache_->max_cells(), cache_->num_free(), cache_->high_water()};
}

std::optional<SessionId> TableExecutor::open_session() { return table().open(); }

Status TableExecutor::close_session(SessionId id) { return table().close(id); }

StatusOr<SessionId> TableExecutor::clone_session(SessionId src, int32_t upto) {
  return table().clone(src, upto);
}

StatusOr<int32_t> TableExecutor::session_length(SessionId id) const {
  check_sessions();
  return table_->length(id);
}

Status TableExecutor::rewind_session(SessionId id, int32_t pos) { return table().rewind(id, pos); }

StatusOr<std::vector<int32_t>> TableExecutor::session_cells(SessionId id) const {
  check_sessions();
  CELLM_ASSIGN_OR_RETURN(const std::span<const int32_t> cells, table_->cells(id));
  return std::vector<int32_t>(cells.begin(), cells.end());
}

Status TableExecutor::check_fetch_rows(std::span<const int32_t> rows, size_t num_rows) const {
  for (size_t k = 0; k < rows.size(); ++k) {
    if (rows[k] < 0 || static_cast<size_t>(rows[k]) >= num_rows ||
        (k > 0 && rows[k - 1] >= rows[k])) {
      return invalid_argument(name_ + "::fetch_logits: row " + std::to_string(rows[k]) +
                              " is not an ascending output row of the " + std::to_string(num_rows));
    }
  }
  return ok_status();
}

Status TableExecutor::place_call(const PackedStep& step, const SliceCall& call, CellStep* cells) {
  const auto seqs = std::span<const SeqId>(step.seq_ids).subspan(call.begin, call.num_tokens);
  const auto positions =
      std::span<const int32_t>(step.positions).subspan(call.begin, call.num_tokens);
  CELLM_ASSIGN_OR_RETURN(const bool admitted, cache().declare_step(seqs, positions));
  if (!admitted) {
    return internal_error("the cell pool refused " + std::to_string(call.num_tokens) +
                          " tokens that SessionTable::pack admitted");
  }
  cache_->place(cells);
  return ok_status();
}

void TableExecutor::abort_step(const PackedStep& step) {
  if (cache().has_declared_step()) cache_->cancel_step();
  table_->rollback(step);
}

void TableExecutor::commit_step() { table().commit(); }

}  // namespace cellm
