#include "engine/scheduler.h"

#include <gtest/gtest.h>

namespace infernix {
namespace {

TEST(Scheduler, AdmitsIntoFreeSlotsAndChunksPrompts) {
  Scheduler s(SchedulerOptions{2, 16, 8});
  s.Add(1, 20);
  s.Add(2, 3);
  s.Add(3, 5);
  StepPlan p = s.Plan();
  ASSERT_EQ(p.seqs.size(), 2u);  // two slots; request 3 waits
  EXPECT_EQ(p.seqs[0].request_id, 1u);
  EXPECT_EQ(p.seqs[0].n_tokens, 8);  // the prefill chunk
  EXPECT_TRUE(p.seqs[0].admitted && p.seqs[0].prefill && !p.seqs[0].wants_logits);
  EXPECT_EQ(p.seqs[1].request_id, 2u);
  EXPECT_EQ(p.seqs[1].n_tokens, 3);
  EXPECT_TRUE(p.seqs[1].wants_logits);  // the whole prompt: sample now
  EXPECT_NE(p.seqs[0].slot, p.seqs[1].slot);
  EXPECT_EQ(p.n_tokens, 11);
  EXPECT_EQ(s.Plan().n_tokens, 11);  // Plan has no side effects
  s.Apply(p);
  EXPECT_EQ(s.running(), 2u);
  EXPECT_EQ(s.waiting(), 1u);

  p = s.Plan();  // request 2 decodes one token; request 1 continues its prompt
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(p.seqs[0].request_id, 2u);
  EXPECT_FALSE(p.seqs[0].prefill);
  EXPECT_EQ(p.seqs[0].pos_begin, 3);
  EXPECT_EQ(p.seqs[1].request_id, 1u);
  EXPECT_EQ(p.seqs[1].pos_begin, 8);
  EXPECT_EQ(p.seqs[1].n_tokens, 8);
  s.Apply(p);

  int freed_slot = p.seqs[0].slot;
  s.Remove(2);  // finished: its slot goes to request 3
  p = s.Plan();
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(p.seqs[0].request_id, 1u);
  EXPECT_EQ(p.seqs[0].n_tokens, 4);
  EXPECT_TRUE(p.seqs[0].wants_logits);
  EXPECT_EQ(p.seqs[1].request_id, 3u);
  EXPECT_TRUE(p.seqs[1].admitted);
  EXPECT_EQ(p.seqs[1].slot, freed_slot);
  s.Apply(p);
  EXPECT_EQ(s.waiting(), 0u);
}

TEST(Scheduler, TokenBudgetIsRespectedUntilEveryoneDecodes) {
  Scheduler s(SchedulerOptions{4, 10, 100});
  for (uint64_t id = 1; id <= 4; ++id) s.Add(id, 6);
  StepPlan p = s.Plan();
  EXPECT_EQ(p.n_tokens, 10);
  ASSERT_EQ(p.seqs.size(), 2u);  // 6 + 4
  EXPECT_FALSE(p.seqs[1].wants_logits);
  s.Apply(p);
  for (int step = 0; step < 10; ++step) {
    p = s.Plan();
    EXPECT_LE(p.n_tokens, 10);
    s.Apply(p);
  }
  p = s.Plan();
  EXPECT_EQ(s.running(), 4u);
  ASSERT_EQ(p.seqs.size(), 4u);
  for (const auto& q : p.seqs) EXPECT_FALSE(q.prefill);
}

TEST(Scheduler, RemoveWaitingAndUnknown) {
  Scheduler s(SchedulerOptions{1, 16, 16});
  s.Add(1, 4);
  s.Add(2, 4);
  s.Remove(2);
  s.Remove(99);
  EXPECT_EQ(s.waiting(), 1u);
  s.Apply(s.Plan());
  s.Remove(1);
  EXPECT_TRUE(s.idle());
  EXPECT_TRUE(s.Plan().empty());
}

}  // namespace
}  // namespace infernix
