// Lab 03: what makes a block -> tile mapping "diagonal", checked on the tile log that transpose_diagonal writes.
// Header-only, used by the GPU gates (on the student's log) and by cpu.order (on known mappings).
#pragma once
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

namespace lab03::order {

// log[b] = tile_row * gx + tile_col of the tile block b (launch order) moved, on a gx x gy tile grid (gx tiles
// along the columns of `in`). Returns "" when the mapping is a diagonal order, else what is wrong:
//  1. every block recorded a tile of the grid (-1, the gates' fill, means it recorded none);
//  2. every tile was taken exactly once (a bijection);
//  3. on grids of at least 3 x 3 tiles, consecutive blocks (b, b + 1) rarely share a tile-row or a tile-column: at
//     most ceil((gx * gy - 1) / min(gx, gy)) of the gx * gy - 1 pairs may, one per "round" of blocks, where the
//     diagonal wraps. Row-major order shares the tile-row in all pairs but one per tile-row, column-major order
//     the tile-column; the rotation b -> (b % gy, (b / gy + b % gy) % gx) shares at most one pair per round.
//     On grids with a side below 3 there is no room for a diagonal, and only 1 and 2 are checked.
inline std::string diagonal_problem(const std::vector<int>& log, unsigned gx, unsigned gy) {
  const std::size_t total = std::size_t(gx) * gy;
  std::ostringstream os;
  auto where = [&](std::size_t b) {
    std::ostringstream w;
    w << "block " << b << " (blockIdx.x = " << b % gx << ", blockIdx.y = " << b / gx << ")";
    return w.str();
  };
  auto tile = [&](int t) {
    std::ostringstream w;
    w << "tile (row " << t / int(gx) << ", column " << t % int(gx) << ")";
    return w.str();
  };
  if (log.size() != total) {
    os << "the tile log has " << log.size() << " entries for a grid of " << total << " blocks";
    return os.str();
  }
  std::vector<std::size_t> taken_by(total, total);
  for (std::size_t b = 0; b < total; ++b) {
    const int t = log[b];
    if (t < 0 || std::size_t(t) >= total) {
      os << where(b) << " recorded " << (t == -1 ? std::string("no tile") : "tile number " + std::to_string(t))
         << ": every block must move its tile with the provided transpose_tile(..., tile_log) (a diagonal kernel "
            "that calls transpose_rowmajor records nothing)";
      return os.str();
    }
    if (taken_by[t] != total) {
      os << where(taken_by[t]) << " and " << where(b) << " both took " << tile(t)
         << ": the block -> tile mapping is not a bijection on this " << gx << " x " << gy << " tile grid";
      return os.str();
    }
    taken_by[t] = b;
  }
  if (gx < 3 || gy < 3) return "";
  std::size_t shared = 0, first = total;
  for (std::size_t b = 0; b + 1 < total; ++b) {
    const int r0 = log[b] / int(gx), c0 = log[b] % int(gx), r1 = log[b + 1] / int(gx), c1 = log[b + 1] % int(gx);
    if (r0 == r1 || c0 == c1) {
      ++shared;
      if (first == total) first = b;
    }
  }
  const std::size_t side = gx < gy ? gx : gy, allowed = (total - 1 + side - 1) / side;
  if (shared <= allowed) return "";
  os << "not a diagonal order: consecutive blocks share a tile-row or a tile-column in " << shared << " of "
     << total - 1 << " pairs (at most " << allowed << " on this " << gx << " x " << gy
     << " tile grid, one per round of min(gx, gy) blocks); the first: " << where(first) << " took "
     << tile(log[first]) << ", block " << first + 1 << " took " << tile(log[first + 1]);
  return os.str();
}

}  // namespace lab03::order
