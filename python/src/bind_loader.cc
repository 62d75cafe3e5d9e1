#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "pipeline/locality.h"
#include "python/src/bindings.h"
#include "ssdfeed/loader.h"
#include "ssdfeed/metrics.h"

namespace nb = nanobind;

namespace ssdfeed::py {

namespace {

struct LoaderArgs {
  std::string source, cache, on_error = "raise", image_key, label_key;
  uint64_t cache_capacity = 0;
  int resize_short = 0, max_long = 0;
  std::pair<int, int> resize{0, 0}, center_crop{0, 0};
  bool gray = false;
  bool augment = false;
  std::pair<int, int> size{224, 224};
  std::pair<double, double> scale{0.08, 1.0}, ratio{3.0 / 4, 4.0 / 3};
  bool flip = true;
  size_t batch_size = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  int workers = 0, prefetch = 2, rank = 0, world_size = 1;
  bool drop_last = false;
  std::string shard = "global";
  int rotate_every = 1;
  uint64_t id_begin = 0, id_end = 0;
  std::string dtype = "uint8", layout = "NHWC";
  std::array<float, 3> mean{0, 0, 0}, std{1, 1, 1};
  bool metrics = true;
  int metrics_port = 0;
  std::string metrics_host = "127.0.0.1";
};

ShardMode ParseShard(const std::string& name) {
  if (name != "global" && name != "sticky" && name != "rotate")
    ThrowIfError(Status::InvalidArgument("shard must be 'global', 'sticky' or 'rotate'"));
  return name == "sticky"   ? ShardMode::kSticky
         : name == "rotate" ? ShardMode::kRotate
                            : ShardMode::kGlobal;
}

const char* ShardName(ShardMode m) {
  return m == ShardMode::kSticky ? "sticky" : m == ShardMode::kRotate ? "rotate" : "global";
}

LoaderOptions ToOptions(const LoaderArgs& a) {
  LoaderOptions o;
  o.source = a.source;
  o.source_options.image_key = a.image_key;
  o.source_options.label_key = a.label_key;
  if (a.on_error != "raise" && a.on_error != "skip")
    ThrowIfError(Status::InvalidArgument("on_error must be 'raise' or 'skip'"));
  o.source_options.on_error = a.on_error == "skip" ? OnError::kSkip : OnError::kRaise;
  o.prepare = MakeSpec(a.resize_short, a.max_long, a.resize, a.center_crop, a.gray);
  o.cache.root = a.cache;
  o.cache.capacity_bytes = a.cache_capacity;
  o.augment = {a.augment,      a.size.first,  a.size.second,  a.scale.first,
               a.scale.second, a.ratio.first, a.ratio.second, a.flip};
  o.batch_size = a.batch_size;
  o.shuffle = a.shuffle;
  o.seed = a.seed;
  o.workers = a.workers;
  o.prefetch = a.prefetch;
  o.rank = a.rank;
  o.world_size = a.world_size;
  o.drop_last = a.drop_last;
  o.shard = ParseShard(a.shard);
  o.rotate_every = a.rotate_every;
  o.id_begin = a.id_begin;
  o.id_end = a.id_end;
  if (a.dtype == "uint8")
    o.output.dtype = DType::kUint8;
  else if (a.dtype == "float32")
    o.output.dtype = DType::kFloat32;
  else if (a.dtype == "float16")
    o.output.dtype = DType::kFloat16;
  else
    ThrowIfError(Status::InvalidArgument("dtype must be uint8, float32 or float16"));
  if (a.layout != "NHWC" && a.layout != "NCHW")
    ThrowIfError(Status::InvalidArgument("layout must be NHWC or NCHW"));
  o.output.layout = a.layout == "NCHW" ? Layout::kNCHW : Layout::kNHWC;
  o.output.mean = a.mean;
  o.output.std = a.std;
  o.metrics = a.metrics;
  o.metrics_port = a.metrics_port;
  o.metrics_host = a.metrics_host;
  return o;
}

// numpy arrays that view the batch buffer; the capsule keeps it alive.
nb::tuple BatchToArrays(const Batch& b) {
  auto* keep = new std::shared_ptr<BatchBuffer>(b.buffer);
  nb::capsule owner(keep,
                    [](void* p) noexcept { delete static_cast<std::shared_ptr<BatchBuffer>*>(p); });
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
  return nb::make_tuple(images, labels);
}

nb::dict StatsDict(const LoaderStats& s) {
  nb::dict d;
  // The same names and numbers as `ssdfeed bench loader --json` (one list).
  for (const auto& [name, v] : LoaderStatsFields(s)) {
    if (name == "wait_seconds")
      d[name.c_str()] = v;
    else
      d[name.c_str()] = static_cast<uint64_t>(v);
  }
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

void BindLoader(nb::module_& m) {
  nb::class_<LoaderArgs>(m, "LoaderArgs", "Arguments of _Loader (set by ssdfeed.Loader).")
      .def(nb::init<>())
      .def_rw("source", &LoaderArgs::source)
      .def_rw("cache", &LoaderArgs::cache)
      .def_rw("cache_capacity", &LoaderArgs::cache_capacity)
      .def_rw("on_error", &LoaderArgs::on_error)
      .def_rw("image_key", &LoaderArgs::image_key)
      .def_rw("label_key", &LoaderArgs::label_key)
      .def_rw("resize_short", &LoaderArgs::resize_short)
      .def_rw("max_long", &LoaderArgs::max_long)
      .def_rw("resize", &LoaderArgs::resize)
      .def_rw("center_crop", &LoaderArgs::center_crop)
      .def_rw("gray", &LoaderArgs::gray)
      .def_rw("augment", &LoaderArgs::augment)
      .def_rw("size", &LoaderArgs::size)
      .def_rw("scale", &LoaderArgs::scale)
      .def_rw("ratio", &LoaderArgs::ratio)
      .def_rw("flip", &LoaderArgs::flip)
      .def_rw("batch_size", &LoaderArgs::batch_size)
      .def_rw("shuffle", &LoaderArgs::shuffle)
      .def_rw("seed", &LoaderArgs::seed)
      .def_rw("workers", &LoaderArgs::workers)
      .def_rw("prefetch", &LoaderArgs::prefetch)
      .def_rw("rank", &LoaderArgs::rank)
      .def_rw("world_size", &LoaderArgs::world_size)
      .def_rw("drop_last", &LoaderArgs::drop_last)
      .def_rw("shard", &LoaderArgs::shard)
      .def_rw("rotate_every", &LoaderArgs::rotate_every)
      .def_rw("id_begin", &LoaderArgs::id_begin)
      .def_rw("id_end", &LoaderArgs::id_end)
      .def_rw("dtype", &LoaderArgs::dtype)
      .def_rw("layout", &LoaderArgs::layout)
      .def_rw("mean", &LoaderArgs::mean)
      .def_rw("std", &LoaderArgs::std)
      .def_rw("metrics", &LoaderArgs::metrics)
      .def_rw("metrics_port", &LoaderArgs::metrics_port)
      .def_rw("metrics_host", &LoaderArgs::metrics_host);

  m.def(
      "cached_id_ranges",
      [](const LoaderArgs& a) {
        LoaderOptions o = ToOptions(a);
        Result<std::vector<std::pair<uint64_t, uint64_t>>> r = Status::Aborted("unset");
        {
          nb::gil_scoped_release nogil;
          r = CachedIdRanges(o);
        }
        return ValueOrThrow(std::move(r));
      },
      nb::arg("args"),
      "[(begin, end), ...] id runs the cache root of args holds for its source and "
      "preparation; creates nothing.");

  nb::class_<Loader>(m, "NativeLoader", "The native loader; use ssdfeed.Loader.")
      .def_static(
          "open",
          [](const LoaderArgs& a) {
            LoaderOptions o = ToOptions(a);
            Result<std::unique_ptr<Loader>> r = Status::Aborted("unset");
            {
              nb::gil_scoped_release nogil;
              r = Loader::Open(o);
            }
            return ValueOrThrow(std::move(r));
          },
          nb::arg("args"))
      .def(
          "next",
          [](Loader& l) -> nb::object {
            Batch b;
            Result<bool> r = false;
            {
              nb::gil_scoped_release nogil;  // workers run while we wait
              r = l.Next(&b);
            }
            ThrowIfError(r.status());
            if (!*r) return nb::none();
            return BatchToArrays(b);
          },
          "The next (images, labels) of the epoch, or None at its end.")
      .def("set_epoch",
           [](Loader& l, uint64_t e) {
             nb::gil_scoped_release nogil;
             l.SetEpoch(e);
           })
      .def("stop",
           [](Loader& l) {
             nb::gil_scoped_release nogil;
             l.Stop();
           })
      .def("num_batches", &Loader::num_batches)
      .def("num_samples", &Loader::num_samples)
      .def("source_size", &Loader::source_size)
      .def("stats", [](const Loader& l) { return StatsDict(l.stats()); })
      .def("state",
           [](const Loader& l) {
             LoaderState s = l.state();
             nb::dict d;
             d["epoch"] = s.epoch;
             d["batches_consumed"] = s.batches_consumed;
             d["position"] = s.position;
             d["seed"] = s.seed;
             d["rank"] = s.rank;
             d["world_size"] = s.world_size;
             d["num_samples"] = s.num_samples;
             d["batch_size"] = s.batch_size;
             d["shard"] = ShardName(s.shard);
             d["rotate_every"] = s.rotate_every;
             return d;
           })
      .def("load_state", [](Loader& l, nb::dict d) {
        LoaderState s;
        s.epoch = nb::cast<uint64_t>(d["epoch"]);
        s.batches_consumed = nb::cast<uint64_t>(d["batches_consumed"]);
        if (d.contains("position")) s.position = nb::cast<uint64_t>(d["position"]);
        s.seed = nb::cast<uint64_t>(d["seed"]);
        s.rank = nb::cast<int>(d["rank"]);
        s.world_size = nb::cast<int>(d["world_size"]);
        s.num_samples = nb::cast<uint64_t>(d["num_samples"]);
        s.batch_size = nb::cast<size_t>(d["batch_size"]);
        if (d.contains("shard")) s.shard = ParseShard(nb::cast<std::string>(d["shard"]));
        if (d.contains("rotate_every")) s.rotate_every = nb::cast<int>(d["rotate_every"]);
        Status st;
        {
          nb::gil_scoped_release nogil;
          st = l.LoadState(s);
        }
        ThrowIfError(st);
      });
}

}  // namespace ssdfeed::py
