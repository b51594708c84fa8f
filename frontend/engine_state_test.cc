#include "frontend/engine_state.h"

#include <gtest/gtest.h>
#include <liburing.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>

namespace ringfs::frontend {
namespace {

TEST(HandoffDirectoryTest, SendsToAWithdrawnRingAreRefusedAndNotCounted) {
  HandoffDirectory directory(2);
  EXPECT_EQ(directory.BeginSend(1), -1);
  EXPECT_TRUE(directory.Quiet(1));

  directory.Publish(1, 42);
  EXPECT_EQ(directory.BeginSend(1), 42);
  EXPECT_FALSE(directory.Quiet(1)) << "a send in flight";
  directory.Withdraw(1);
  EXPECT_EQ(directory.BeginSend(1), -1);
  EXPECT_FALSE(directory.Quiet(1)) << "withdrawing does not forget the send already counted";
  directory.EndSend(1);
  EXPECT_TRUE(directory.Quiet(1));
  EXPECT_TRUE(directory.Quiet(0));
}

// Drains `ring`'s completion queue; returns how many completions it held.
uint64_t Reap(io_uring* ring) {
  // Completions beyond the queue's size wait in the kernel until it is entered (RingWorker's
  // loop enters it on every pass).
  if (io_uring_cq_has_overflow(ring)) io_uring_get_events(ring);
  uint64_t count = 0;
  io_uring_cqe* cqe;
  unsigned head;
  io_uring_for_each_cqe(ring, head, cqe) ++count;
  io_uring_cq_advance(ring, static_cast<unsigned>(count));
  return count;
}

// Regression (issue 9): a worker that retired ended its thread while a peer that had read its
// ring fd a moment earlier still sent it a handoff; the message landed in a completion queue
// nobody read any more, and the restart closed that ring, so the entry and its request vanished.
// Here one thread plays the worker — a fresh ring per round, retired after a random while and
// closed a little later, as QueueEngine::Start does — and another hands it messages as fast as it
// can. Every message the sender saw succeed must have been read by the worker.
TEST(HandoffDirectoryTest, HandoffsRacingARingRestartAreNeverLost) {
  constexpr int kRounds = 3000;
  HandoffDirectory directory(2);
  std::atomic<bool> worker_done{false};
  std::atomic<uint64_t> received{0};
  std::atomic<int> setup_errors{0};

  std::thread worker([&] {
    std::mt19937 random(7);
    for (int round = 0; round < kRounds; ++round) {
      io_uring ring;
      if (io_uring_queue_init(256, &ring, 0) < 0) {
        ++setup_errors;
        break;
      }
      directory.Publish(1, ring.ring_fd);
      auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(random() % 200);
      while (std::chrono::steady_clock::now() < until) received += Reap(&ring);
      // Retire exactly as RingWorker::ReadyToExit does.
      directory.Withdraw(1);
      while (true) {
        received += Reap(&ring);
        if (directory.Quiet(1) && io_uring_cq_ready(&ring) == 0 &&
            !io_uring_cq_has_overflow(&ring)) {
          break;
        }
        std::this_thread::yield();
      }
      // The thread has ended; the engine closes the ring only on the next start.
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 100));
      io_uring_queue_exit(&ring);
    }
    worker_done = true;
  });

  uint64_t sent = 0, refused = 0, failed = 0;
  io_uring sender;
  ASSERT_EQ(io_uring_queue_init(8, &sender, 0), 0);
  while (!worker_done.load()) {
    int fd = directory.BeginSend(1);
    if (fd < 0) {
      ++refused;  // the sender keeps the work (RingWorker::HandOff)
      continue;
    }
    io_uring_sqe* sqe = io_uring_get_sqe(&sender);
    io_uring_prep_msg_ring(sqe, fd, 0, 0x1234, 0);
    io_uring_submit(&sender);
    io_uring_cqe* cqe;
    ASSERT_EQ(io_uring_wait_cqe(&sender, &cqe), 0);
    int res = cqe->res;
    io_uring_cqe_seen(&sender, cqe);
    directory.EndSend(1);
    if (res >= 0) {
      ++sent;
    } else {
      ++failed;  // e.g. the fd was not a ring: the sender keeps the work
    }
  }
  worker.join();
  io_uring_queue_exit(&sender);
  ASSERT_EQ(setup_errors.load(), 0);
  EXPECT_EQ(received.load(), sent) << "refused " << refused << ", failed " << failed;
  EXPECT_GT(sent, 0u);
}

}  // namespace
}  // namespace ringfs::frontend
