#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <iterator>
#include <set>
#include <string_view>

#include "python/src/bindings.h"
#include "ssdfeed/loader.h"
#include "ssdfeed/metrics.h"
#include "ssdfeed/warm.h"

namespace nb = nanobind;

namespace ssdfeed::py {

namespace {

// A state as the dict state_dict() returns; the elastic-resume keys only
// when they say something, so other states keep their old shape.
nb::dict StateToDict(const LoaderState& s) {
  nb::dict d;
  d["epoch"] = s.epoch;
  d["batches_consumed"] = s.batches_consumed;
  d["position"] = s.position;
  d["seed"] = s.seed;
  d["rank"] = s.rank;
  d["world_size"] = s.world_size;
  d["num_samples"] = s.num_samples;
  d["batch_size"] = s.batch_size;
  d["shard"] = EnumName(s.shard);
  d["rotate_every"] = s.rotate_every;
  if (!s.resumed_from.empty()) {
    nb::list layers;
    for (const auto& layer : s.resumed_from) {
      nb::list l;
      for (uint64_t p : layer) l.append(p);
      layers.append(l);
    }
    d["resumed_from"] = layers;
  }
  if (s.merged) d["merged"] = true;
  return d;
}

LoaderState DictToState(const nb::dict& d) {
  LoaderState s;
  s.epoch = nb::cast<uint64_t>(d["epoch"]);
  s.batches_consumed = nb::cast<uint64_t>(d["batches_consumed"]);
  if (d.contains("position")) s.position = nb::cast<uint64_t>(d["position"]);
  s.seed = nb::cast<uint64_t>(d["seed"]);
  s.rank = nb::cast<int>(d["rank"]);
  s.world_size = nb::cast<int>(d["world_size"]);
  s.num_samples = nb::cast<uint64_t>(d["num_samples"]);
  s.batch_size = nb::cast<size_t>(d["batch_size"]);
  if (d.contains("shard"))
    s.shard = ValueOrThrow(ParseEnum<ShardMode>(nb::cast<std::string>(d["shard"])));
  if (d.contains("rotate_every")) s.rotate_every = nb::cast<int>(d["rotate_every"]);
  if (d.contains("resumed_from")) s.resumed_from = nb::cast<ResumeLayers>(d["resumed_from"]);
  if (d.contains("merged")) s.merged = nb::cast<bool>(d["merged"]);
  return s;
}

const char* FieldKindName(FieldKind k) { return EnumName(k); }

FieldKind ParseFieldKind(const std::string& name) {
  return ValueOrThrow(ParseEnum<FieldKind>(name));
}

nb::list FieldSpecsToList(const std::vector<FieldSpec>& fields) {
  nb::list l;
  for (const FieldSpec& f : fields) l.append(nb::make_tuple(f.name, FieldKindName(f.kind), f.key));
  return l;
}

std::vector<FieldSpec> ListToFieldSpecs(const nb::list& l) {
  std::vector<FieldSpec> v;
  for (nb::handle h : l) {
    auto t = nb::cast<nb::tuple>(h);
    v.push_back({nb::cast<std::string>(t[0]), ParseFieldKind(nb::cast<std::string>(t[1])),
                 nb::cast<std::string>(t[2])});
  }
  return v;
}

nb::capsule BufferOwner(const Batch& b) {
  auto* keep = new std::shared_ptr<BatchBuffer>(b.buffer);
  return nb::capsule(
      keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<BatchBuffer>*>(p); });
}

// A numpy array of any numpy dtype over bytes someone else keeps alive
// (owner): a byte view reinterpreted, so no dtype needs a DLPack spelling.
nb::object BytesAsArray(const void* data, size_t nbytes, const std::string& dtype,
                        const std::vector<uint64_t>& shape, nb::handle owner) {
  static uint8_t empty = 0;  // numpy wants a pointer even for no bytes
  size_t n[1] = {nbytes};
  void* p = nbytes > 0 ? const_cast<void*>(data) : &empty;
  nb::object flat = nb::cast(nb::ndarray<nb::numpy, uint8_t>(p, 1, n, owner));
  nb::list dims;
  for (uint64_t d : shape) dims.append(d);
  nb::object np = nb::module_::import_("numpy");
  return flat.attr("view")(np.attr("dtype")(dtype)).attr("reshape")(nb::tuple(dims));
}

// An item (one sample's field) as its own array: a copy it owns.
nb::object ItemToPython(const Field& f) {
  if (f.kind == FieldKind::kBytes) return nb::bytes(f.data.data(), f.data.size());
  auto* own = new std::string(f.data);
  nb::capsule owner(own, [](void* p) noexcept { delete static_cast<std::string*>(p); });
  return BytesAsArray(own->data(), own->size(), f.dtype, f.shape, owner);
}

nb::object FieldToPython(const BatchField& f, nb::handle owner) {
  if (f.stacked) return BytesAsArray(f.data.data(), f.data.size(), f.dtype, f.shape, owner);
  nb::list items;
  for (const Field& it : f.items) items.append(ItemToPython(it));
  return items;
}

// numpy arrays that view the batch buffer; the capsule keeps it alive.
std::pair<nb::object, nb::object> ImagesAndLabels(const Batch& b, nb::handle owner) {
  size_t shape[4] = {b.shape[0], b.shape[1], b.shape[2], b.shape[3]};
  void* data = b.buffer->images.data();
  nb::object images;
  switch (b.dtype) {
    case DType::kUint8:
      images = nb::cast(nb::ndarray<nb::numpy, uint8_t>(data, 4, shape, owner));
      break;
    case DType::kFloat32:
      images = nb::cast(nb::ndarray<nb::numpy, float>(data, 4, shape, owner));
      break;
    case DType::kFloat16: {
      nb::dlpack::dtype f16{static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
      images = nb::cast(nb::ndarray<nb::numpy>(data, 4, shape, owner, nullptr, f16));
      break;
    }
  }
  size_t lshape[1] = {b.size};
  auto labels =
      nb::cast(nb::ndarray<nb::numpy, int64_t>(b.buffer->labels.data(), 1, lshape, owner));
  return {images, labels};
}

nb::tuple BatchToArrays(const Batch& b) {
  nb::capsule owner = BufferOwner(b);
  auto [images, labels] = ImagesAndLabels(b, owner);
  return nb::make_tuple(images, labels);
}

// A batch of a source with fields beyond image and label: {name: array or
// list}, the image first, then the class label (when the source has one
// that travels outside the fields), then the fields in the record's order.
nb::dict BatchToDict(const Batch& b, const std::vector<FieldSpec>& schema) {
  nb::capsule owner = BufferOwner(b);
  auto [images, labels] = ImagesAndLabels(b, owner);
  const auto& fields = b.buffer->fields;
  auto collated = [&](const std::string& name) {
    return std::any_of(fields.begin(), fields.end(),
                       [&](const BatchField& f) { return f.name == name; });
  };
  nb::dict d;
  // A source without an image (Python items) has no images to give.
  for (const FieldSpec& f : schema)
    if (f.kind == FieldKind::kImage) d[f.name.c_str()] = images;
  for (const FieldSpec& f : schema) {
    if (f.kind == FieldKind::kLabel && !collated(f.name)) {
      d[f.name.c_str()] = labels;
      break;  // one class label travels outside the fields
    }
  }
  for (const BatchField& f : fields) d[f.name.c_str()] = FieldToPython(f, owner);
  return d;
}

// The native loader as Python holds it. Its workers may wait for the GIL
// (a Python source's compute), so it is stopped and destroyed without it.
struct LoaderHandle {
  std::unique_ptr<Loader> loader;
  explicit LoaderHandle(std::unique_ptr<Loader> l) : loader(std::move(l)) {}
  LoaderHandle(LoaderHandle&&) = default;
  ~LoaderHandle() {
    if (!loader) return;
    nb::gil_scoped_release nogil;
    loader.reset();
  }
  Loader* operator->() const { return loader.get(); }
};

// The stages of one set of times: {"origin_read": seconds, ...}.
nb::dict StagesDict(const std::array<double, kNumTimers>& times) {
  nb::dict d;
  for (const auto& t : kTimers)
    if (t.is_stage()) d[std::string(t.key).c_str()] = times[static_cast<size_t>(t.slot)];
  return d;
}

nb::dict StatsDict(const LoaderStats& s) {
  nb::dict d;
  // The same names and numbers as `ssdfeed bench loader --json` (one list):
  // counters are integers, times seconds.
  std::set<std::string_view> counters;
  for (const auto& c : kCounters) counters.insert(c.key);
  for (const auto& [name, v] : LoaderStatsFields(s)) {
    if (counters.count(name) || name == "step_wait_steps")
      d[name.c_str()] = static_cast<uint64_t>(v);
    else
      d[name.c_str()] = v;
  }
  d["stages"] = StagesDict(s.times);
  nb::list workers;
  for (const auto& w : s.worker_times) {
    nb::dict one;
    one["busy_seconds"] = w[static_cast<size_t>(Tmr::kWorkerBusy)];
    one["stages"] = StagesDict(w);
    workers.append(one);
  }
  d["workers"] = workers;
  nb::list bounds, counts;
  for (double b : s.wait_histogram_bounds) bounds.append(b);
  for (uint64_t c : s.wait_histogram) counts.append(c);
  d["wait_histogram_bounds"] = bounds;
  d["wait_histogram"] = counts;
  d["cache_dir"] = s.cache_dir;
  d["cache_warning"] = s.cache_warning;
  d["cache_open_errors"] = s.cache_open_errors;
  d["cache_admitting"] = s.cache_admitting;
  d["stats_file"] = s.stats_file;
  return d;
}

}  // namespace

// Each C++ option struct bound once, field by field: ssdfeed.Loader fills
// a LoaderOptions directly, so no option is restated on the way down.
void BindOptions(nb::module_& m) {
  BindEnum<ShardMode>(m, "ShardMode", "LoaderOptions.shard");
  BindEnum<WarmRead>(m, "WarmRead", "CacheOptions.warm_read");
  BindEnum<FillWrite>(m, "FillWrite", "CacheOptions.fill_write");

  BindEnum<AugmentKind>(m, "AugmentKind", "AugmentSpec.kind");
  nb::class_<AugmentSpec>(m, "AugmentSpec",
                          "RandomResizedCrop + flip, flip, or scale jitter + padded crop "
                          "(C++ AugmentSpec).")
      .def(nb::init<>())
      .def_rw("enabled", &AugmentSpec::enabled)
      .def_rw("kind", &AugmentSpec::kind)
      .def_rw("flip_prob", &AugmentSpec::flip_prob)
      .def_rw("jitter_min", &AugmentSpec::jitter_min)
      .def_rw("jitter_max", &AugmentSpec::jitter_max)
      .def_rw("fill", &AugmentSpec::fill)
      .def_rw("mask_fill", &AugmentSpec::mask_fill)
      .def_rw("height", &AugmentSpec::height)
      .def_rw("width", &AugmentSpec::width)
      .def_rw("scale_min", &AugmentSpec::scale_min)
      .def_rw("scale_max", &AugmentSpec::scale_max)
      .def_rw("ratio_min", &AugmentSpec::ratio_min)
      .def_rw("ratio_max", &AugmentSpec::ratio_max)
      .def_rw("flip", &AugmentSpec::flip)
      .def_rw("min_box_visible", &AugmentSpec::min_box_visible);

  nb::class_<OutputSpec>(m, "OutputSpec", "Batch dtype, layout, normalisation (C++ OutputSpec).")
      .def(nb::init<>())
      .def_rw("dtype", &OutputSpec::dtype)
      .def_rw("layout", &OutputSpec::layout)
      .def_rw("mean", &OutputSpec::mean)
      .def_rw("std", &OutputSpec::std);

  nb::class_<SampleShape>(m, "SampleShape", "(height, width, channels); 0 where it varies.")
      .def_ro("height", &SampleShape::height)
      .def_ro("width", &SampleShape::width)
      .def_ro("channels", &SampleShape::channels);
  m.def("served_sample_shape", &ServedSampleShape, nb::arg("prepare"), nb::arg("augment"),
        "Shape of every sample a loader with these options serves.");

  nb::class_<SourceOptions>(m, "SourceOptions", "C++ SourceOptions (Env: the default).")
      .def(nb::init<>())
      .def_rw("image_key", &SourceOptions::image_key)
      .def_rw("label_key", &SourceOptions::label_key)
      .def_rw("on_error", &SourceOptions::on_error)
      .def_rw("allow_empty_classes", &SourceOptions::allow_empty_classes)
      .def_prop_rw(
          "fields", [](const SourceOptions& o) { return FieldSpecsToList(o.fields); },
          [](SourceOptions& o, const nb::list& l) { o.fields = ListToFieldSpecs(l); },
          "[(name, kind, key), ...]: the fields each sample gives (empty: the layout's "
          "default).")
      .def_rw("coco_crowd", &SourceOptions::coco_crowd)
      .def_rw("follow_links", &SourceOptions::follow_links)
      .def_rw("defer_index", &SourceOptions::defer_index)
      .def_rw("stems", &SourceOptions::stems);

  m.def(
      "field_kinds",
      [] {
        std::vector<std::string> v;
        for (const auto& s : Spellings<FieldKind>()) v.emplace_back(s.name);
        return v;
      },
      "Every field kind's name ('auto': from the name, then the key).");

  nb::class_<CacheOptions>(m, "CacheOptions", "C++ CacheOptions (Env: the default).")
      .def(nb::init<>())
      .def_rw("root", &CacheOptions::root)
      .def_rw("capacity_bytes", &CacheOptions::capacity_bytes)
      .def_rw("group_shared", &CacheOptions::group_shared)
      .def_rw("sync_bytes", &CacheOptions::sync_bytes)
      .def_rw("reserve_chunk", &CacheOptions::reserve_chunk)
      .def_rw("segment_bytes", &CacheOptions::segment_bytes)
      .def_rw("claim_wait_seconds", &CacheOptions::claim_wait_seconds)
      .def_rw("record_use", &CacheOptions::record_use)
      .def_rw("warm_read", &CacheOptions::warm_read)
      .def_rw("fill_write", &CacheOptions::fill_write);

  nb::class_<LoaderOptions>(m, "LoaderOptions", "C++ LoaderOptions; filled by ssdfeed.Loader.")
      .def(nb::init<>())
      .def("__copy__", [](const LoaderOptions& o) { return LoaderOptions(o); })
      .def_rw("source", &LoaderOptions::source)
      .def_prop_rw(
          "source_object",
          [](const LoaderOptions& o) { return std::const_pointer_cast<Source>(o.source_object); },
          [](LoaderOptions& o, std::shared_ptr<Source> s) { o.source_object = std::move(s); },
          nb::for_setter(nb::arg("source").none()),
          "A Source to read instead of opening `source` (then only its name); None: open it.")
      .def_rw("source_options", &LoaderOptions::source_options)
      .def_rw("prepare", &LoaderOptions::prepare)
      .def_rw("cache", &LoaderOptions::cache)
      .def_rw("augment", &LoaderOptions::augment)
      .def_rw("output", &LoaderOptions::output)
      .def_rw("batch_size", &LoaderOptions::batch_size)
      .def_rw("shuffle", &LoaderOptions::shuffle)
      .def_rw("seed", &LoaderOptions::seed)
      .def_rw("workers", &LoaderOptions::workers)
      .def_rw("prefetch", &LoaderOptions::prefetch)
      .def_rw("rank", &LoaderOptions::rank)
      .def_rw("world_size", &LoaderOptions::world_size)
      .def_rw("drop_last", &LoaderOptions::drop_last)
      .def_rw("sampler_drop_last", &LoaderOptions::sampler_drop_last)
      .def_rw("validation_split", &LoaderOptions::validation_split)
      .def_rw("validation_subset", &LoaderOptions::validation_subset)
      .def_rw("split_seed", &LoaderOptions::split_seed)
      .def_rw("shard", &LoaderOptions::shard)
      .def_rw("rotate_every", &LoaderOptions::rotate_every)
      .def_rw("id_begin", &LoaderOptions::id_begin)
      .def_rw("id_end", &LoaderOptions::id_end)
      .def_rw("metrics", &LoaderOptions::metrics)
      .def_rw("metrics_port", &LoaderOptions::metrics_port)
      .def_rw("metrics_host", &LoaderOptions::metrics_host);

  m.def(
      "_counters",
      [] {
        nb::list rows;
        for (const auto& c : kCounters)
          rows.append(nb::make_tuple(std::string(c.key), std::string(c.name), std::string(c.help)));
        return rows;
      },
      "The counter table (stats key, Prometheus name, help), for tests.");
  auto stats =
      nb::class_<LoaderStats>(m, "LoaderStats", "C++ LoaderStats (Loader.stats() gives a dict).");
  // One attribute per counter of the table (ssdfeed/counters.h).
  for (const auto& c : kCounters)
    stats.def_ro(c.key.data(), kLoaderStatsCounterOf[static_cast<size_t>(c.slot)]);
  stats.def_ro("cache_open_errors", &LoaderStats::cache_open_errors)
      .def_ro("wait_seconds", &LoaderStats::wait_seconds)
      .def_ro("wait_histogram_bounds", &LoaderStats::wait_histogram_bounds)
      .def_ro("wait_histogram", &LoaderStats::wait_histogram)
      .def_ro("cache_dir", &LoaderStats::cache_dir)
      .def_ro("cache_warning", &LoaderStats::cache_warning)
      .def_ro("cache_admitting", &LoaderStats::cache_admitting)
      .def_ro("stats_file", &LoaderStats::stats_file)
      .def("as_dict", &StatsDict, "The dict Loader.stats() returns.");
}

void BindLoader(nb::module_& m) {
  BindOptions(m);

  m.def(
      "cached_id_ranges",
      [](const LoaderOptions& o) {
        Result<std::vector<std::pair<uint64_t, uint64_t>>> r = Status::Aborted("unset");
        {
          nb::gil_scoped_release nogil;
          r = CachedIdRanges(o);
        }
        return ValueOrThrow(std::move(r));
      },
      nb::arg("options"),
      "[(begin, end), ...] id runs the cache root of options holds for its source and "
      "preparation; creates nothing.");

  m.def(
      "open_loader_source",
      [](const LoaderOptions& o) {
        Result<std::unique_ptr<Source>> r = Status::Aborted("unset");
        {
          nb::gil_scoped_release nogil;
          std::string warning;  // the Loader itself reports the stored index's problems
          r = OpenLoaderSource(o, &warning);
        }
        return ValueOrThrow(std::move(r));
      },
      nb::arg("options"),
      "The source of options opened as the Loader opens it: its shard index taken from the "
      "cache root when stored there, so no shard is read to open it.");

  m.def(
      "epoch_order",
      [](uint64_t n, bool shuffle, uint64_t seed, uint64_t epoch, int rank, int world_size,
         bool drop_last, ShardMode shard, int rotate_every) {
        std::vector<uint64_t> ids;
        {
          nb::gil_scoped_release nogil;
          ids =
              EpochOrder(n, shuffle, seed, epoch, rank, world_size, drop_last, shard, rotate_every);
        }
        return nb::bytes(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(uint64_t));
      },
      nb::arg("n"), nb::arg("shuffle"), nb::arg("seed"), nb::arg("epoch"), nb::arg("rank") = 0,
      nb::arg("world_size") = 1, nb::arg("drop_last") = false,
      nb::arg("shard") = ShardMode::kGlobal, nb::arg("rotate_every") = 1,
      "The ids rank reads in epoch `epoch`, in order, as the loader plans them (EpochOrder), "
      "as native uint64 bytes: ssdfeed.tf.cache(shuffle=True) reads its passes in it, and "
      "ssdfeed.distributed gives each node the origin reads its ranks make first.");
  m.def("split_ids", &SplitIds, nb::arg("begin"), nb::arg("end"), nb::arg("validation_split"),
        nb::arg("seed"), nb::arg("validation"),
        "The ids of one part of a seeded random split of [begin, end), as the loader draws it.");
  m.def(
      "estimate_entry_bytes",
      [](const Source& s, const PrepareSpec& spec) {
        nb::gil_scoped_release nogil;
        return EstimateEntry(s, spec).entry_bytes();
      },
      nb::arg("source"), nb::arg("prepare"),
      "Bytes a full cache entry of source under prepare will take (from a few probed samples).");

  nb::class_<LoaderHandle>(m, "NativeLoader", "The native loader; use ssdfeed.Loader.")
      .def_static(
          "open",
          [](const LoaderOptions& o) {
            Result<std::unique_ptr<Loader>> r = Status::Aborted("unset");
            {
              nb::gil_scoped_release nogil;
              r = Loader::Open(o);
            }
            return LoaderHandle{ValueOrThrow(std::move(r))};
          },
          nb::arg("options"))
      .def(
          "next",
          [](LoaderHandle& l) -> nb::object {
            Batch b;
            Result<bool> r = false;
            {
              nb::gil_scoped_release nogil;  // workers run while we wait
              r = l->Next(&b);
            }
            ThrowIfError(r.status());
            if (!*r) return nb::none();
            std::vector<FieldSpec> schema = l->fields();
            if (IsClassicSchema(schema)) return BatchToArrays(b);
            return BatchToDict(b, schema);
          },
          "The next batch of the epoch, or None at its end: (images, labels) for a source of "
          "images and class labels, else a dict of its fields.")
      .def(
          "fields", [](const LoaderHandle& l) { return FieldSpecsToList(l->fields()); },
          "[(name, kind, key), ...]: the source's fields.")
      .def("set_epoch",
           [](LoaderHandle& l, uint64_t e) {
             nb::gil_scoped_release nogil;
             l->SetEpoch(e);
           })
      .def("stop",
           [](LoaderHandle& l) {
             nb::gil_scoped_release nogil;
             l->Stop();
           })
      .def("num_batches", [](const LoaderHandle& l) { return l->num_batches(); })
      .def("num_samples", [](const LoaderHandle& l) { return l->num_samples(); })
      .def("source_size", [](const LoaderHandle& l) { return l->source_size(); })
      .def("stats", [](const LoaderHandle& l) { return l->stats(); })
      .def(
          "record_rank_max_wait",
          [](const LoaderHandle& l, double seconds) { l->RecordRankMaxWait(seconds); },
          "Adds the slowest rank's wait to ssdfeed_rank_max_wait_seconds_total.")
      .def("state",
           [](const LoaderHandle& l) {
             LoaderState s;
             {
               nb::gil_scoped_release nogil;  // waits for a Next on another thread
               s = l->state();
             }
             return StateToDict(s);
           })
      .def("load_state", [](LoaderHandle& l, nb::dict d) {
        LoaderState s = DictToState(d);
        Status st;
        {
          nb::gil_scoped_release nogil;
          st = l->LoadState(s);
        }
        ThrowIfError(st);
      });
  m.def(
      "merge_states",
      [](nb::list states) {
        std::vector<LoaderState> v;
        for (nb::handle h : states) v.push_back(DictToState(nb::cast<nb::dict>(h)));
        Result<LoaderState> r = MergeStates(v);
        ThrowIfError(r.status());
        return StateToDict(*r);
      },
      "The states of all ranks of one world merged into one that loads into a loader of any "
      "world size.");
}

}  // namespace ssdfeed::py
