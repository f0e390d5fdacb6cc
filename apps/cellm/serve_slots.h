// SlotQueue: the generation slots of `cellm serve` — at most `capacity` generations run at once
// (one slot per choice), and requests take their slots strictly in arrival order: a request
// wanting more slots than are free waits at the head, and later ones wait behind it even where
// they would fit (so a request for n = 4 is not passed for ever by single ones). stop() refuses
// every waiter and every later acquire.
//
// It knows nothing of HTTP or generations; serve_http.cpp holds one per server. Thread-safety:
// every member may be called from any thread; a Lease is released once, by its holder.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "core/status.h"

namespace cellm::app {

class SlotQueue {
 public:
  explicit SlotQueue(int32_t capacity);
  SlotQueue(const SlotQueue&) = delete;
  SlotQueue& operator=(const SlotQueue&) = delete;

  // Slots held until release() or destruction. Must not outlive its queue.
  class Lease {
   public:
    Lease(SlotQueue* queue, int32_t count) : queue_(queue), count_(count) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { release(); }
    void release();

   private:
    SlotQueue* queue_;
    int32_t count_;
  };

  // Waits for `count` (1 ≤ count ≤ capacity) free slots in arrival order; Cancelled when the
  // queue is stopped first (or already was).
  StatusOr<std::unique_ptr<Lease>> acquire(int32_t count);

  // Refuses every waiting and later acquire; leases held stay valid.
  void stop();
  bool stopped() const;

  int32_t capacity() const { return capacity_; }
  int32_t num_running() const;  // slots held
  int32_t num_queued() const;   // acquires waiting

 private:
  const int32_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  int32_t num_running_ = 0;   // guarded by mutex_
  int32_t num_queued_ = 0;    // guarded by mutex_
  uint64_t next_ticket_ = 0;  // guarded by mutex_: the next arrival's place in the queue
  uint64_t head_ticket_ = 0;  // guarded by mutex_: the place whose turn it is
  bool stopped_ = false;      // guarded by mutex_
};

}  // namespace cellm::app
