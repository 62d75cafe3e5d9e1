// ItemStore (ssdfeed/items.h): a user's items stored and served through the
// fetcher, with its claims, counters and admission, from the public header
// alone.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
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

}  // namespace
}  // namespace ssdfeed
