#!/usr/bin/env python3
"""Writes a synthetic feature CSV and a matching request list for trying
hpcml-fcache (standard library only; any python3 works).

    make_sample_data.py --rows 100000 --entities 5000 --out /tmp/demo
    hpcml-fcache ingest /tmp/demo/churn.h5 --csv /tmp/demo/features.csv \
        --entity customer --timestamp event_time --zone ae --classification confidential
    hpcml-fcache asof /tmp/demo/churn.h5 --requests /tmp/demo/requests.csv \
        --entity customer --time as_of --label churned_next_month
"""
import argparse
import datetime
import os
import random


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=100000, help="feature rows")
    p.add_argument("--entities", type=int, default=5000)
    p.add_argument("--requests", type=int, default=20000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default=".")
    a = p.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    start = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    span = 180 * 86400

    def iso(seconds):
        return (start + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")

    with open(os.path.join(a.out, "features.csv"), "w") as f:
        f.write("customer,event_time,tenure_months,monthly_spend,support_calls,days_since_login\n")
        for _ in range(a.rows):
            c = rng.randrange(a.entities)
            t = rng.randrange(span)
            f.write(f"{c},{iso(t)},{rng.randrange(1, 72)},{rng.uniform(5, 150):.2f},"
                    f"{rng.randrange(0, 10)},{rng.randrange(0, 60)}\n")
    with open(os.path.join(a.out, "requests.csv"), "w") as f:
        f.write("customer,as_of,churned_next_month\n")
        for _ in range(a.requests):
            f.write(f"{rng.randrange(a.entities)},{iso(rng.randrange(span))},{int(rng.random() < 0.2)}\n")
    print(f"wrote {a.rows} feature rows and {a.requests} requests to {a.out}")


if __name__ == "__main__":
    main()
