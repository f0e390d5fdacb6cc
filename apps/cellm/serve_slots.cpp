#include "serve_slots.h"

#include <string>

#include "core/check.h"

namespace cellm::app {

SlotQueue::SlotQueue(int32_t capacity) : capacity_(capacity) {
  CELLM_CHECK(capacity >= 1) << "a slot queue needs at least one slot";
}

void SlotQueue::Lease::release() {
  if (queue_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(queue_->mutex_);
    queue_->num_running_ -= count_;
    CELLM_CHECK(queue_->num_running_ >= 0) << "more slots released than were held";
  }
  queue_->cv_.notify_all();  // only the head ticket may take them
  queue_ = nullptr;
}

StatusOr<std::unique_ptr<SlotQueue::Lease>> SlotQueue::acquire(int32_t count) {
  CELLM_CHECK(count >= 1 && count <= capacity_)
      << count << " slots asked of a queue of " << capacity_ << ": it would wait for ever";
  // Tickets keep arrival order: a condition variable wakes its waiters in no particular order.
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t ticket = next_ticket_++;
  ++num_queued_;
  cv_.wait(lock, [&] {
    return stopped_ || (ticket == head_ticket_ && num_running_ + count <= capacity_);
  });
  --num_queued_;
  if (stopped_) return cancelled("the server is stopping");
  ++head_ticket_;
  num_running_ += count;
  lock.unlock();
  cv_.notify_all();  // the next ticket may fit too
  return std::make_unique<Lease>(this, count);
}

void SlotQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
  }
  cv_.notify_all();
}

bool SlotQueue::stopped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stopped_;
}

int32_t SlotQueue::num_running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_running_;
}

int32_t SlotQueue::num_queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_queued_;
}

}  // namespace cellm::app
