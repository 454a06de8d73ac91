#!/usr/bin/env python3
"""Build data/wind.csv.gz and data/air.csv.gz: real spatio-temporal station
data (one station = one agent) from two Debian R data packages.

  wind.csv.gz : Irish daily mean wind speed 1961-1978, 12 stations, knots
                (`wind` + `wind.loc` in r-cran-gstat; Haslett & Raftery 1989)
  air.csv.gz  : German rural-background PM10 daily means 1998-2009, 70
                stations, ug/m3 (`air`, `stations`, `dates` in r-cran-spacetime;
                AirBase via B. Graeler)

Columns (both): station,lon,lat,day,doy,value
  station : wind: station code (e.g. VAL); air: AirBase station code (e.g. DESH001)
  lon,lat : WGS84 degrees (wind: converted from the DMS strings of wind.loc;
            air: already +proj=longlat +datum=WGS84, used as is)
  day     : 0-based day index from the first date of the set
            (wind: 1961-01-01, air: 1998-01-01)
  doy     : day of year, 1..366
  value   : wind speed in knots / PM10 in ug/m3, as stored in the package
Rows are ordered by day, then by station in the package's order; missing
values are dropped. Outputs are byte-reproducible (gzip mtime=0, no name).

Usage: pip install rdata==1.1.0 numpy
       python3 scripts/build_stations.py [--debs DIR] [--out DIR]
Without --debs the script runs `apt-get download r-cran-gstat r-cran-spacetime`
into a temporary directory (needs `apt-get update` done once). With --debs DIR
it uses the .deb files already in DIR. Built from Debian bookworm's
r-cran-gstat 2.1-0-1 and r-cran-spacetime 1.2-8+dfsg-1.
"""
import argparse
import datetime
import glob
import gzip
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import rdata

EXPECTED_VERSIONS = {"r-cran-gstat": "2.1-0-1", "r-cran-spacetime": "1.2-8+dfsg-1"}


def write_gz(path, text):
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                           compresslevel=9) as gz:
            gz.write(text.encode("ascii"))


def fmt(x, nd):
    """Shortest decimal for x rounded to nd places (no float noise)."""
    s = repr(round(float(x), nd))
    return s[:-2] if s.endswith(".0") else s


def extract(debs_dir, work):
    versions = {}
    for pkg in EXPECTED_VERSIONS:
        debs = sorted(glob.glob(os.path.join(debs_dir, pkg + "_*.deb")))
        if not debs:
            sys.exit(f"no {pkg}_*.deb in {debs_dir}")
        deb = debs[-1]
        ver = subprocess.run(["dpkg-deb", "-f", deb, "Version"], check=True,
                             capture_output=True, text=True).stdout.strip()
        versions[pkg] = ver
        if ver != EXPECTED_VERSIONS[pkg]:
            print(f"WARNING: {pkg} is {ver}, data/README.md documents "
                  f"{EXPECTED_VERSIONS[pkg]}; output may differ", file=sys.stderr)
        subprocess.run(["dpkg-deb", "-x", deb, work], check=True)
    return versions


def toplevel(rda_path):
    """Name -> parsed RObject for every object saved in an .rda file."""
    o = rdata.parser.parse_file(rda_path).object
    objs = {}
    while o.info.type.name == "LIST":
        objs[symname(o.tag)] = o.value[0]
        o = o.value[1]
    return objs


def symname(tag):
    if tag.info.type.name == "REF":
        tag = tag.referenced_object
    return tag.value.value.decode()


def attrs(robj):
    out = {}
    a = robj.attributes
    while a is not None and a.info.type.name == "LIST":
        out[symname(a.tag)] = a.value[0]
        a = a.value[1]
    return out


def strvec(robj):
    return [c.value.decode() for c in robj.value]


def dms(s):
    """'52d16\\'56.791"N' -> decimal degrees (as sp::char2dms)."""
    m = re.fullmatch(r"""\s*(\d+)d(?:(\d+)')?(?:([\d.]+)")?([NSEW])\s*""", s)
    if not m:
        raise ValueError(s)
    d, mi, se, h = m.groups()
    v = int(d) + int(mi or 0) / 60 + float(se or 0) / 3600
    return -v if h in "SW" else v


def build_wind(root, out):
    rda = os.path.join(root, "usr/lib/R/site-library/gstat/data/wind.rda")
    d = rdata.conversion.convert(rdata.parser.parse_file(rda))
    wind, loc = d["wind"], d["wind.loc"]
    codes = [c for c in wind.columns if c not in ("year", "month", "day")]
    assert len(codes) == 12, codes
    loc = {str(r.Code).strip(): (dms(str(r.Longitude)), dms(str(r.Latitude)))
           for r in loc.itertuples()}
    dates = [datetime.date(1900 + int(y), int(m), int(dd))
             for y, m, dd in zip(wind["year"], wind["month"], wind["day"])]
    d0 = dates[0]
    assert all((b - a).days == 1 for a, b in zip(dates, dates[1:]))
    vals = wind[codes].to_numpy(dtype="float64")
    lines = ["station,lon,lat,day,doy,value"]
    for i, dt in enumerate(dates):
        day, doy = (dt - d0).days, dt.timetuple().tm_yday
        for j, c in enumerate(codes):
            v = vals[i, j]
            if np.isnan(v):
                continue
            lon, lat = loc[c]
            lines.append(f"{c},{fmt(lon, 6)},{fmt(lat, 6)},{day},{doy},{fmt(v, 2)}")
    write_gz(out, "\n".join(lines) + "\n")
    return len(lines) - 1, d0, dates[-1], len(codes)


def build_air(root, out):
    rda = os.path.join(root, "usr/lib/R/site-library/spacetime/data/air.rda")
    objs = toplevel(rda)
    air = objs["air"]
    at = attrs(air)
    nsp, nt = (int(x) for x in at["dim"].value)
    ids = strvec(at["dimnames"].value[0])          # rownames = station codes
    assert len(ids) == nsp
    # column-major R matrix, stations x days
    pm = np.asarray(air.value, dtype="float64").reshape((nt, nsp))  # [t, s]
    conv = rdata.conversion.SimpleConverter()
    dates = np.asarray(conv.convert(objs["dates"]), dtype="float64")  # days since 1970-01-01
    assert len(dates) == nt and np.all(np.diff(dates) == 1)
    st = conv.convert(objs["stations"])
    assert "longlat" in str(st.proj4string.projargs[0]) and "WGS84" in str(st.proj4string.projargs[0])
    coords = np.asarray(st.coords, dtype="float64")
    assert coords.shape == (nsp, 2)
    epoch = datetime.date(1970, 1, 1)
    d0 = epoch + datetime.timedelta(days=int(dates[0]))
    lines = ["station,lon,lat,day,doy,value"]
    for t in range(nt):
        dt = epoch + datetime.timedelta(days=int(dates[t]))
        day, doy = (dt - d0).days, dt.timetuple().tm_yday
        for s in range(nsp):
            v = pm[t, s]
            if np.isnan(v):
                continue
            lines.append(f"{ids[s]},{fmt(coords[s, 0], 6)},{fmt(coords[s, 1], 6)},"
                         f"{day},{doy},{fmt(v, 3)}")
    write_gz(out, "\n".join(lines) + "\n")
    return len(lines) - 1, d0, dt, nsp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--debs", help="directory holding the two .deb files")
    ap.add_argument("--out", default=os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "data")))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        debs = a.debs
        if debs is None:
            debs = os.path.join(tmp, "debs")
            os.makedirs(debs)
            subprocess.run(["apt-get", "download", *EXPECTED_VERSIONS], cwd=debs, check=True)
        root = os.path.join(tmp, "root")
        versions = extract(debs, root)
        print("packages:", versions)
        for name, fn in (("wind", build_wind), ("air", build_air)):
            out = os.path.join(a.out, name + ".csv.gz")
            n, first, last, ns = fn(root, out)
            print(f"wrote {out}: {n} rows, {ns} stations, {first}..{last}")


if __name__ == "__main__":
    main()
