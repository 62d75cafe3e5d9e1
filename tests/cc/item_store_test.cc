// ItemStore (ssdfeed/items.h): a user's items stored and served through the
// fetcher, with its claims, counters and admission, from the public header
// alone.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <thread>

#include "ssdfeed/items.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

// Item i: "v" = bytes "item<i>" and "n" = a .npy int64 scalar array (1,) of i.
std::string NpyI64(int64_t v) {
  std::string h = "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }";
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  return out + h + std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

std::vector<EncodedField> ItemFieldsOf(uint64_t i) {
  return {{"v", FieldKind::kBytes, "item" + std::to_string(i), false, ""},
          {"n", FieldKind::kArray, NpyI64(static_cast<int64_t>(i)), false, ""}};
}

// A compute that counts its calls.
ItemCompute Counting(std::atomic<int>* calls) {
  return [calls](uint64_t i, std::vector<EncodedField>* out) {
    calls->fetch_add(1);
    *out = ItemFieldsOf(i);
    return Status::OK();
  };
}

void ExpectItem(const ItemFields& f, uint64_t i) {
  ASSERT_EQ(f.views.size(), 2u);
  EXPECT_EQ(f.views[0].name, "v");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f.views[0].data), f.views[0].size),
            "item" + std::to_string(i));
  EXPECT_EQ(f.views[1].name, "n");
  EXPECT_EQ(f.views[1].dtype, "<i8");
  ASSERT_EQ(f.views[1].size, sizeof(int64_t));
  int64_t n = -1;
  std::memcpy(&n, f.views[1].data, sizeof n);
  EXPECT_EQ(n, static_cast<int64_t>(i));
}

std::unique_ptr<ItemStore> OpenStore(const std::string& root, uint64_t size,
                                     ItemStoreOptions o = {}) {
  auto r = ItemStore::Open(root, "test:items", "ident", size, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(ItemStore, GetComputesAMissOnceAndServesItFromTheCache) {
  test::TempDir root;
  auto store = OpenStore(root.path(), 4);
  std::atomic<int> calls{0};
  ItemFields f;
  for (int pass = 0; pass < 2; ++pass)
    for (uint64_t i = 0; i < 4; ++i) {
      ASSERT_TRUE(store->Get(i, Counting(&calls), &f).ok());
      ExpectItem(f, i);
    }
  EXPECT_EQ(calls.load(), 4);
  EXPECT_EQ(store->Present(), 4u);
  ItemStoreStats st = store->Stats();
  EXPECT_EQ(st.snapshot[Ctr::kCacheMisses], 4u);
  EXPECT_EQ(st.snapshot[Ctr::kCacheHits], 4u);
  // A second store of the same entry (another job) computes nothing.
  auto other = OpenStore(root.path(), 4);
  ASSERT_TRUE(other->Get(2, Counting(&calls), &f).ok());
  ExpectItem(f, 2);
  EXPECT_EQ(calls.load(), 4);
  EXPECT_EQ(other->fingerprint(), store->fingerprint());
}

TEST(ItemStore, LookupAndPutGoThroughTheFetcher) {
  test::TempDir root;
  auto store = OpenStore(root.path(), 3);
  ItemFields f;
  EXPECT_TRUE(store->Lookup(1, &f).IsNotFound());
  bool stored = false;
  ASSERT_TRUE(store->Put(1, ItemFieldsOf(1), &stored).ok());
  EXPECT_TRUE(stored);
  ASSERT_TRUE(store->Put(1, ItemFieldsOf(1), &stored).ok());
  EXPECT_FALSE(stored);  // present already
  ASSERT_TRUE(store->Lookup(1, &f).ok());
  ExpectItem(f, 1);
  // Another store's record (synced as it closes) is found once this one
  // refreshes: Present() always does (a lookup at most every 20 ms).
  auto other = OpenStore(root.path(), 3);
  ASSERT_TRUE(other->Put(2, ItemFieldsOf(2), &stored).ok());
  ASSERT_TRUE(stored);
  other.reset();
  EXPECT_EQ(store->Present(), 2u);
  ASSERT_TRUE(store->Lookup(2, &f).ok());
  ExpectItem(f, 2);
  EXPECT_EQ(store->Stats().snapshot[Ctr::kCacheHits], 2u);
  // No compute: Get is a lookup.
  EXPECT_TRUE(store->Get(0, ItemCompute(), &f).IsNotFound());
  // Out of range and image fields are refused, naming the item.
  EXPECT_TRUE(store->Get(3, ItemCompute(), &f).IsInvalidArgument());
  Status bad = store->Put(0, {{"m", FieldKind::kMask, "x", false, ""}}, &stored);
  EXPECT_TRUE(bad.IsInvalidArgument());
  EXPECT_NE(bad.message().find("test:items item 0"), std::string::npos) << bad.ToString();
}

TEST(ItemStore, ConcurrentGetsComputeEachItemOnce) {
  test::TempDir root;
  constexpr uint64_t kN = 64;
  ItemStoreOptions o;
  o.claim_wait_seconds = 60;  // a waiter returns as the claim is let go of: never this long
  auto a = OpenStore(root.path(), kN, o), b = OpenStore(root.path(), kN, o);
  std::atomic<int> calls{0};
  auto run = [&](ItemStore* s) {
    ItemFields f;
    for (uint64_t i = 0; i < kN; ++i) {
      ASSERT_TRUE(s->Get(i, Counting(&calls), &f).ok());
      ExpectItem(f, i);
    }
  };
  std::thread t1(run, a.get()), t2(run, b.get());
  t1.join();
  t2.join();
  // A claim lets one compute while the other waits for its record.
  EXPECT_EQ(calls.load(), static_cast<int>(kN));
}

TEST(ItemStore, SkipKeepsWhyAnItemFailed) {
  test::TempDir root;
  ItemStoreOptions o;
  o.on_error = OnError::kSkip;
  auto store = OpenStore(root.path(), 2, o);
  ItemFields f;
  ItemCompute failing = [](uint64_t, std::vector<EncodedField>*) {
    return Status::InvalidArgument("bad record");
  };
  ASSERT_TRUE(store->Get(1, failing, &f).ok());
  EXPECT_TRUE(f.skipped);
  EXPECT_TRUE(f.views.empty());
  ItemStoreStats st = store->Stats();
  EXPECT_EQ(st.snapshot[Ctr::kSkipped], 1u);
  ASSERT_EQ(st.skipped_items.size(), 1u);
  EXPECT_NE(st.skipped_items[0].find("bad record"), std::string::npos);
  // Without skip, the error is Get's.
  auto raising = OpenStore(root.path(), 2);
  EXPECT_TRUE(raising->Get(1, failing, &f).IsInvalidArgument());
}

TEST(ItemStore, AForkedChildOpensItsOwnStateAndLeavesTheParentsAlone) {
  test::TempDir root;
  auto store = OpenStore(root.path(), 4);
  std::atomic<int> calls{0};
  ItemFields f;
  ASSERT_TRUE(store->Get(0, Counting(&calls), &f).ok());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child reads the parent's record and stores its own, then drops
    // the store: none of the parent's slot or claims may be released.
    ItemFields cf;
    std::atomic<int> child_calls{0};
    bool ok = store->Get(0, Counting(&child_calls), &cf).ok() && child_calls.load() == 0 &&
              store->Get(1, Counting(&child_calls), &cf).ok() && child_calls.load() == 1;
    store.reset();
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent still stores and sees the child's record.
  ASSERT_TRUE(store->Get(1, Counting(&calls), &f).ok());
  ExpectItem(f, 1);
  EXPECT_EQ(calls.load(), 1);
  bool stored = false;
  ASSERT_TRUE(store->Put(2, ItemFieldsOf(2), &stored).ok());
  EXPECT_TRUE(stored);
}

// ItemStream: items of a length not known up front, in parts of P items
// plus a meta record of the length that a fill writes at its end.
std::unique_ptr<ItemStream> OpenStream(const std::string& root, uint64_t part_size,
                                       ItemStoreOptions o = {}) {
  ItemStreamOptions so;
  so.store = o;
  so.part_size = part_size;
  auto r = ItemStream::Open(root, "test:stream", "ident", so);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(ItemStream, ItemsGoIntoPartsAndTheLengthIsRecordedAtTheEnd) {
  test::TempDir root;
  auto stream = OpenStream(root.path(), 3);
  std::atomic<int> calls{0};
  ItemFields f;
  EXPECT_TRUE(stream->Length().status().IsNotFound());
  for (uint64_t i = 0; i < 7; ++i) {  // parts 0, 1 and 2 (one item)
    ASSERT_TRUE(stream->Get(i, Counting(&calls), &f).ok());
    ExpectItem(f, i);  // compute was called with the stream's index
  }
  EXPECT_FALSE(stream->Complete()) << "every item stored, but the fill has not ended";
  EXPECT_EQ(stream->Present(7), 7u);
  ASSERT_TRUE(stream->Finish(7).ok());
  auto n = stream->Length();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 7u);
  EXPECT_TRUE(stream->Complete());
  EXPECT_EQ(stream->Stats().snapshot[Ctr::kCacheMisses], 7u);
  // The entries are ItemStores of these identities (docs/cache-format.md,
  // "Items"): part 1 holds items 3..5 as its 0..2.
  auto part1 = ItemStore::Open(root.path(), "test:stream", "ident P=3 part=1", 3);
  ASSERT_TRUE(part1.ok()) << part1.status().ToString();
  ASSERT_TRUE((*part1)->Lookup(2, &f).ok());
  ExpectItem(f, 5);
  auto meta = ItemStore::Open(root.path(), "test:stream", "ident P=3 meta", 1);
  ASSERT_TRUE(meta.ok());
  ASSERT_TRUE((*meta)->Lookup(0, &f).ok());
  ASSERT_EQ(f.views.size(), 1u);
  EXPECT_EQ(f.views[0].dtype, "<i8");
  // Another job finds it complete and computes nothing.
  auto other = OpenStream(root.path(), 3);
  EXPECT_TRUE(other->Complete());
  ASSERT_TRUE(other->Get(6, Counting(&calls), &f).ok());
  ExpectItem(f, 6);
  EXPECT_EQ(calls.load(), 7);
  // Another part size is another set of entries.
  EXPECT_TRUE(OpenStream(root.path(), 4)->Length().status().IsNotFound());
}

TEST(ItemStream, ConcurrentFillsComputeEachItemOnce) {
  test::TempDir root;
  constexpr uint64_t kN = 40;
  ItemStoreOptions o;
  o.claim_wait_seconds = 60;  // a waiter returns as the claim is let go of: never this long
  auto a = OpenStream(root.path(), 16, o), b = OpenStream(root.path(), 16, o);
  std::atomic<int> calls{0};
  auto run = [&](ItemStream* s) {
    ItemFields f;
    for (uint64_t i = 0; i < kN; ++i) {
      ASSERT_TRUE(s->Get(i, Counting(&calls), &f).ok());
      ExpectItem(f, i);
    }
    ASSERT_TRUE(s->Finish(kN).ok());
  };
  std::thread t1(run, a.get()), t2(run, b.get());
  t1.join();
  t2.join();
  EXPECT_EQ(calls.load(), static_cast<int>(kN));
  EXPECT_TRUE(a->Complete());
}

// A fill killed (SIGKILL, nothing flushed or closed) before its end leaves
// no length: no job takes the items for complete; the next fill reads what
// the killed one stored and computes only the rest.
TEST(ItemStream, AKilledFillIsNeverCompleteAndIsResumed) {
  test::TempDir root;
  constexpr uint64_t kN = 7, kKilledAt = 5;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto stream = OpenStream(root.path(), 3);
    std::atomic<int> calls{0};
    ItemFields f;
    for (uint64_t i = 0; i < kKilledAt; ++i)
      if (!stream || !stream->Get(i, Counting(&calls), &f).ok()) _exit(1);
    kill(getpid(), SIGKILL);
    _exit(2);  // not reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child failed before it was killed: " << status;
  auto stream = OpenStream(root.path(), 3);
  EXPECT_TRUE(stream->Length().status().IsNotFound());
  EXPECT_FALSE(stream->Complete());
  EXPECT_EQ(stream->Present(kN), kKilledAt) << "what was stored survives the kill";
  std::atomic<int> calls{0};
  ItemFields f;
  for (uint64_t i = 0; i < kN; ++i) {
    ASSERT_TRUE(stream->Get(i, Counting(&calls), &f).ok());
    ExpectItem(f, i);
  }
  EXPECT_EQ(calls.load(), static_cast<int>(kN - kKilledAt));
  EXPECT_FALSE(stream->Complete());
  ASSERT_TRUE(stream->Finish(kN).ok());
  EXPECT_TRUE(stream->Complete());
}

TEST(ItemStream, AMalformedLengthIsCorruptionNamingTheMetaItem) {
  test::TempDir root;
  auto meta = ItemStore::Open(root.path(), "test:stream", "ident P=3 meta", 1);
  ASSERT_TRUE(meta.ok());
  bool stored = false;
  ASSERT_TRUE((*meta)->Put(0, ItemFieldsOf(3), &stored).ok());  // two fields, not one count
  meta->reset();
  Status st = OpenStream(root.path(), 3)->Length().status();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("test:stream item 0"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace ssdfeed
