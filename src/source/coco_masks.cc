#include "source/coco_masks.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace ssdfeed {

namespace {

using json = nlohmann::json;

constexpr double kMaxCoordinate = 65536;

// maskApi.c's rleFrPoly: the polygon's outline sampled densely on a grid 5x
// finer, its crossings of pixel-centre columns kept as y-boundaries, and the
// sorted boundary indices (column-major) turned into runs. The same integer
// and double arithmetic as the C, so the same pixels.
std::vector<uint32_t> PolygonRuns(const std::vector<double>& xy, int64_t h, int64_t w) {
  const double scale = 5;
  const size_t k = xy.size() / 2;
  std::vector<int> x(k + 1), y(k + 1);
  for (size_t j = 0; j < k; ++j) x[j] = static_cast<int>(scale * xy[j * 2] + .5);
  for (size_t j = 0; j < k; ++j) y[j] = static_cast<int>(scale * xy[j * 2 + 1] + .5);
  x[k] = x[0];
  y[k] = y[0];
  std::vector<int> u, v;  // the dense outline
  for (size_t j = 0; j < k; ++j) {
    int xs = x[j], xe = x[j + 1], ys = y[j], ye = y[j + 1];
    int dx = std::abs(xe - xs), dy = std::abs(ys - ye);
    bool flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
    if (flip) {
      std::swap(xs, xe);
      std::swap(ys, ye);
    }
    double s = dx >= dy ? static_cast<double>(ye - ys) / dx : static_cast<double>(xe - xs) / dy;
    if (dx >= dy) {
      for (int d = 0; d <= dx; ++d) {
        int t = flip ? dx - d : d;
        u.push_back(t + xs);
        v.push_back(static_cast<int>(ys + s * t + .5));
      }
    } else {
      for (int d = 0; d <= dy; ++d) {
        int t = flip ? dy - d : d;
        v.push_back(t + ys);
        u.push_back(static_cast<int>(xs + s * t + .5));
      }
    }
  }
  std::vector<uint32_t> a;  // boundary pixels' column-major indices
  for (size_t j = 1; j < u.size(); ++j) {
    if (u[j] == u[j - 1]) continue;
    double xd = u[j] < u[j - 1] ? u[j] : u[j] - 1;
    xd = (xd + .5) / scale - .5;
    if (std::floor(xd) != xd || xd < 0 || xd > static_cast<double>(w - 1)) continue;
    double yd = std::min(v[j], v[j - 1]);
    yd = (yd + .5) / scale - .5;
    if (yd < 0) {
      yd = 0;
    } else if (yd > static_cast<double>(h)) {
      yd = static_cast<double>(h);
    }
    yd = std::ceil(yd);
    a.push_back(
        static_cast<uint32_t>(static_cast<int>(xd) * static_cast<int>(h) + static_cast<int>(yd)));
  }
  a.push_back(static_cast<uint32_t>(h * w));
  std::sort(a.begin(), a.end());
  uint32_t p = 0;
  for (uint32_t& t : a) {
    uint32_t next = t;
    t -= p;
    p = next;
  }
  // Zero-length runs are folded into the run after next, as the C does.
  std::vector<uint32_t> b;
  size_t j = 0;
  b.push_back(a[j++]);
  while (j < a.size()) {
    if (a[j] > 0) {
      b.push_back(a[j++]);
    } else {
      ++j;
      if (j < a.size()) b.back() += a[j++];
    }
  }
  return b;
}

// Sets out's pixels where the runs have 1s (out is h * w, row-major; runs
// are column-major). Union: already set pixels stay set.
void PaintRuns(const std::vector<uint32_t>& runs, int64_t h, int64_t w, uint8_t* out) {
  uint64_t at = 0, n = static_cast<uint64_t>(h) * static_cast<uint64_t>(w);
  bool one = false;
  for (uint32_t r : runs) {
    uint64_t end = std::min<uint64_t>(at + r, n);
    if (one)
      for (uint64_t i = at; i < end; ++i)
        out[(i % static_cast<uint64_t>(h)) * static_cast<uint64_t>(w) + i / h] = 1;
    at = end;
    one = !one;
  }
}

// COCO's compressed counts (maskApi.c's rleFrString): 5-bit groups offset
// by 48, a set 0x20 bit meaning more groups follow, sign-extended from 0x10;
// from the third count on each is a difference to the one two before.
bool RunsFromString(const std::string& s, std::vector<uint32_t>* out) {
  size_t p = 0;
  while (p < s.size()) {
    int64_t x = 0;
    int k = 0;
    bool more = true;
    while (more) {
      if (p >= s.size() || k > 6) return false;  // a uint32 count needs at most 7 groups
      int c = static_cast<unsigned char>(s[p]) - 48;
      if (c < 0 || c > 63) return false;
      x |= static_cast<int64_t>(c & 0x1f) << (5 * k);
      more = (c & 0x20) != 0;
      ++p;
      ++k;
      if (!more && (c & 0x10) != 0) x |= static_cast<int64_t>(-1) * (int64_t{1} << (5 * k));
    }
    if (out->size() > 2) x += (*out)[out->size() - 2];
    if (x < 0 || x > 0xffffffffLL) return false;
    out->push_back(static_cast<uint32_t>(x));
  }
  return true;
}

Status ParseRle(const json& r, int64_t h, int64_t w, const std::string& what,
                std::vector<uint32_t>* runs) {
  if (!r.contains("size") || !r["size"].is_array() || r["size"].size() != 2 ||
      !r["size"][0].is_number_integer() || !r["size"][1].is_number_integer() ||
      !r.contains("counts"))
    return Status::Corruption(what + " is neither polygons nor an RLE {size: [h, w], counts}");
  if (r["size"][0].get<int64_t>() != h || r["size"][1].get<int64_t>() != w)
    return Status::Corruption(what + " RLE size " + r["size"].dump() + " is not its image's [" +
                              std::to_string(h) + ", " + std::to_string(w) + "]");
  const json& c = r["counts"];
  if (c.is_string()) {
    if (!RunsFromString(c.get<std::string>(), runs))
      return Status::Corruption(what + " RLE counts string is not COCO's compressed encoding");
  } else if (c.is_array()) {
    for (const auto& n : c) {
      if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > 0xffffffffLL)
        return Status::Corruption(what + " RLE counts hold " + n.dump() + ", not a run length");
      runs->push_back(static_cast<uint32_t>(n.get<int64_t>()));
    }
  } else {
    return Status::Corruption(what + " RLE counts are neither a list nor a string");
  }
  uint64_t total = 0;
  for (uint32_t n : *runs) total += n;
  if (total != static_cast<uint64_t>(h) * static_cast<uint64_t>(w))
    return Status::Corruption(what + " RLE runs cover " + std::to_string(total) +
                              " pixels, its image has " + std::to_string(h * w));
  return Status::OK();
}

}  // namespace

Status ParseCocoSegmentation(const json& a, int64_t h, int64_t w, const std::string& where,
                             const std::string& ann, CocoSegmentation* out) {
  std::string what = where + ": " + ann + " segmentation";
  if (!a.contains("segmentation"))
    return Status::Corruption(where + ": " + ann + " has no segmentation");
  const json& s = a["segmentation"];
  if (s.is_object()) return ParseRle(s, h, w, what, &out->runs);
  if (!s.is_array())
    return Status::Corruption(what + " is neither polygons nor an RLE {size: [h, w], counts}");
  for (const auto& poly : s) {
    // pycocotools reads a 4-number list as a box: not a polygon either.
    if (!poly.is_array() || poly.size() < 6 || poly.size() % 2 != 0)
      return Status::Corruption(what + " holds " + poly.dump().substr(0, 80) +
                                ", not a polygon [x0, y0, x1, y1, x2, y2, ...]");
    std::vector<double> xy;
    for (const auto& v : poly) {
      // The outline is traced point by point on a 5x grid: a coordinate
      // far outside any image would cost memory (and overflow int).
      if (!v.is_number() || !(std::abs(v.get<double>()) <= kMaxCoordinate))
        return Status::Corruption(what + " holds coordinate " + v.dump() +
                                  ", not a number within +-65536");
      xy.push_back(v.get<double>());
    }
    out->polygons.push_back(std::move(xy));
  }
  return Status::OK();
}

void RasteriseCocoSegmentation(const CocoSegmentation& s, int64_t h, int64_t w, uint8_t* out) {
  std::fill(out, out + h * w, uint8_t{0});
  if (s.polygons.empty()) return PaintRuns(s.runs, h, w, out);
  for (const auto& poly : s.polygons) PaintRuns(PolygonRuns(poly, h, w), h, w, out);
}

}  // namespace ssdfeed
