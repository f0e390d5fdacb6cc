// SlotQueue: capacity, strict arrival order (a large request is not passed by later small ones),
// stop. Waiting threads are observed through num_queued() and the leases they hand back.
#include "serve_slots.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

namespace cellm::app {
namespace {

using namespace std::chrono_literals;
using LeaseOr = StatusOr<std::unique_ptr<SlotQueue::Lease>>;

// Polls until `done()` or two seconds pass; whether it became true.
template <typename Done>
bool eventually(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

std::future<LeaseOr> acquire_async(SlotQueue& queue, int32_t count) {
  return std::async(std::launch::async, [&queue, count] { return queue.acquire(count); });
}

// Stops the queue at scope exit, before the futures declared above it join their threads: a
// waiter left by a failed assertion returns instead of hanging the test.
struct StopOnExit {
  SlotQueue& queue;
  ~StopOnExit() { queue.stop(); }
};

bool is_ready(const std::future<LeaseOr>& f, std::chrono::milliseconds wait = 0ms) {
  return f.wait_for(wait) == std::future_status::ready;
}

TEST(SlotQueueTest, TakesSlotsUpToItsCapacityAndTheNextWaitsForARelease) {
  SlotQueue queue(3);
  LeaseOr two = queue.acquire(2);
  LeaseOr one = queue.acquire(1);
  ASSERT_TRUE(two.ok() && one.ok());
  EXPECT_EQ(queue.num_running(), 3);

  std::future<LeaseOr> waiting = acquire_async(queue, 1);
  const StopOnExit stop_on_exit{queue};
  ASSERT_TRUE(eventually([&] { return queue.num_queued() == 1; }));
  EXPECT_FALSE(is_ready(waiting, 30ms)) << "a fourth slot was handed out of three";
  (*one)->release();
  ASSERT_TRUE(is_ready(waiting, 2s));
  LeaseOr third = waiting.get();
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(queue.num_running(), 3);
  EXPECT_EQ(queue.num_queued(), 0);
  (*two)->release();
  (*two)->release();  // a second release gives nothing back twice
  EXPECT_EQ(queue.num_running(), 1);
  third->reset();  // destruction releases
  EXPECT_EQ(queue.num_running(), 0);
}

TEST(SlotQueueTest, ARequestForManySlotsIsNotPassedByLaterSmallerOnes) {
  SlotQueue queue(2);
  LeaseOr held = queue.acquire(1);
  ASSERT_TRUE(held.ok());
  std::future<LeaseOr> big = acquire_async(queue, 2);  // waits for both slots
  ASSERT_TRUE(eventually([&] { return queue.num_queued() == 1; }));
  std::future<LeaseOr> small = acquire_async(queue, 1);  // one slot is free, but it came later
  const StopOnExit stop_on_exit{queue};
  ASSERT_TRUE(eventually([&] { return queue.num_queued() == 2; }));
  EXPECT_FALSE(is_ready(small, 30ms)) << "a later request passed one waiting at the head";

  (*held)->release();
  ASSERT_TRUE(is_ready(big, 2s));
  LeaseOr big_lease = big.get();
  ASSERT_TRUE(big_lease.ok());
  EXPECT_FALSE(is_ready(small, 30ms));
  (*big_lease)->release();
  ASSERT_TRUE(is_ready(small, 2s));
  EXPECT_TRUE(small.get().ok());
}

TEST(SlotQueueTest, StopRefusesWaitersAndLaterRequestsButLeavesHeldLeases) {
  SlotQueue queue(1);
  LeaseOr held = queue.acquire(1);
  ASSERT_TRUE(held.ok());
  std::future<LeaseOr> first = acquire_async(queue, 1);
  std::future<LeaseOr> second = acquire_async(queue, 1);
  ASSERT_TRUE(eventually([&] { return queue.num_queued() == 2; }));

  queue.stop();
  EXPECT_TRUE(queue.stopped());
  for (std::future<LeaseOr>* waiter : {&first, &second}) {
    ASSERT_TRUE(is_ready(*waiter, 2s)) << "a waiter outlived stop()";
    EXPECT_EQ(waiter->get().status().code(), StatusCode::kCancelled);
  }
  EXPECT_EQ(queue.acquire(1).status().code(), StatusCode::kCancelled);
  EXPECT_EQ(queue.num_running(), 1);
  (*held)->release();
  EXPECT_EQ(queue.num_running(), 0);
  EXPECT_EQ(queue.num_queued(), 0);
}

}  // namespace
}  // namespace cellm::app
