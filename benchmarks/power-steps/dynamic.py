"""Run 36: would a dynamic tile scheduler (blocks take the next tile from an atomic counter) shorten wgmma_ws at
4096^3? From the clock probe's per-block times (probe.py's OUT.json): the last wave's 116 tiles go, in a static
schedule, to blocks 0..115; in a dynamic one to the 116 blocks that finish their third tile first.
Usage: python3 benchmarks/power-steps/dynamic.py probe.json"""
import sys, json, numpy as np
r = json.load(open(sys.argv[1]))["4096-132-store"]
clk, gt = np.array(r["clk"]), np.array(r["gt"])  # clock64 [block, piece, consumer, 3]; %globaltimer at K-loop ends
ok = (clk[..., 1] - clk[..., 0])[:, :, 0] > 0
tiles = ok.sum(1)
g = gt[:, :, 0].astype(float)
g -= g[ok].min()  # ns from the first K loop to end
third = g[:, 2]
fourth = np.where(tiles > 3, g[:, 3], np.nan)
tile_ns = np.nanmedian(fourth - third)
own = np.where(np.isnan(fourth - third), tile_ns, fourth - third)
first = np.argsort(third)[:int((tiles > 3).sum())]
print(f"blocks with 4 tiles: {(tiles > 3).sum()}, with 3: {(tiles == 3).sum()}; a tile: {tile_ns:.0f} ns")
print(f"third tiles' K loops end (ns, p10/p50/p90/max): {np.percentile(third, [10, 50, 90, 100]).round()}")
print(f"last K loop ends, static schedule: {np.nanmax(fourth):.0f} ns")
print(f"                  dynamic, each block at its own pace: {max(third[b] + own[b] for b in first):.0f} ns")
print(f"                  dynamic, every tile the median: {max(third[b] + tile_ns for b in first):.0f} ns")
a, b = g[:, 1] - g[:, 0], fourth - third
m = ~np.isnan(b)
print(f"are slow blocks slow throughout? correlation of their 2nd and 4th tiles' times: {np.corrcoef(a[m], b[m])[0, 1]:.2f}")
