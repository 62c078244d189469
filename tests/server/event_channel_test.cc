// EventChannel's count of unwritten responses: a response is counted from the
// push of an event until its HTTP thread comes back for more (having written
// what it took) or closes; the scheduler waits on that count between steps.
#include "server/event_channel.h"

#include <gtest/gtest.h>

#include <thread>

namespace anymoe {
namespace {

using namespace std::chrono_literals;

RequestEvent Token(int32_t id) {
  RequestEvent ev;
  ev.token = id;
  return ev;
}

TEST(EventChannel, CountsEventsUntilTheNextTakeFindsNothingQueued) {
  RequestTracker unwritten;
  EventChannel channel(&unwritten);
  EXPECT_EQ(unwritten.count(), 0);
  channel.Push(Token(1));
  channel.Push(Token(2));
  EXPECT_EQ(unwritten.count(), 1);  // one response, however many events
  std::deque<TimedEvent> events;
  EXPECT_FALSE(channel.Take(0ms, &events));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(unwritten.count(), 1);  // taken, not yet written
  // Coming back with nothing queued: what was taken has been written.
  EXPECT_FALSE(channel.Take(0ms, &events));
  EXPECT_EQ(events.size(), 2u);
  EXPECT_EQ(unwritten.count(), 0);
  // Events pushed while the HTTP thread writes keep it counted.
  channel.Push(Token(3));
  EXPECT_EQ(unwritten.count(), 1);
  events.clear();
  channel.Take(0ms, &events);
  channel.Push(Token(4));
  channel.Take(0ms, &events);
  EXPECT_EQ(events.size(), 2u);
  EXPECT_EQ(unwritten.count(), 1);
  channel.Take(0ms, &events);
  EXPECT_EQ(unwritten.count(), 0);
}

TEST(EventChannel, ClosingOrDestroyingUncounts) {
  RequestTracker unwritten;
  {
    EventChannel closed(&unwritten), dropped(&unwritten);
    closed.Push(Token(1));
    RequestEvent done;
    done.kind = RequestEvent::Kind::kDone;
    closed.Push(done);
    dropped.Push(Token(1));
    EXPECT_EQ(unwritten.count(), 2);
    std::deque<TimedEvent> events;
    EXPECT_TRUE(closed.Take(0ms, &events));
    closed.Close();  // the response is over: no Take follows
    EXPECT_EQ(unwritten.count(), 1);
    closed.Close();  // twice is harmless
    EXPECT_EQ(unwritten.count(), 1);
    // Nobody writes a closed channel's events (its client left before the
    // scheduler noticed): they are not counted, so no step waits for them.
    closed.Push(Token(2));
    EXPECT_EQ(unwritten.count(), 1);
  }
  EXPECT_EQ(unwritten.count(), 0);  // `dropped` never written: its destructor uncounts
}

TEST(EventChannel, WaitingForTheCountEndsWhenTheWriterComesBack) {
  RequestTracker unwritten;
  EventChannel channel(&unwritten);
  channel.Push(Token(1));
  std::thread writer([&] {
    std::deque<TimedEvent> events;
    channel.Take(1000ms, &events);
    std::this_thread::sleep_for(20ms);  // "writing"
    channel.Take(0ms, &events);
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(unwritten.WaitIdle(start + 5s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 15ms);
  writer.join();
  // And a wait with nothing counted returns at once; one past its limit says so.
  EXPECT_TRUE(unwritten.WaitIdle(std::chrono::steady_clock::now()));
  channel.Push(Token(2));
  EXPECT_FALSE(unwritten.WaitIdle(std::chrono::steady_clock::now() + 5ms));
}

TEST(EventChannel, WithoutATrackerNothingIsCounted) {
  EventChannel channel;
  channel.Push(Token(1));
  std::deque<TimedEvent> events;
  channel.Take(0ms, &events);
  channel.Take(0ms, &events);
  channel.Close();
  EXPECT_EQ(events.size(), 1u);
}

}  // namespace
}  // namespace anymoe
