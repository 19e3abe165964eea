#!/usr/bin/env python3
"""Writes a synthetic feature CSV and a matching request list for trying
hpcml-fcache (standard library only; any python3 works).

Each request's label (churned_next_month) is drawn from the customer's
features as they stood at the request's time (its latest feature row at or
before `as_of`), through a fixed logistic rule with an interaction, so a model
trained on a point-in-time join can learn it, and one trained on later
features would not see the same thing. Requests with no feature row yet get
the base rate.

    make_sample_data.py --rows 100000 --entities 5000 --out /tmp/demo
    hpcml-fcache ingest /tmp/demo/churn.h5 --csv /tmp/demo/features.csv \
        --entity customer --timestamp event_time --zone ae --classification confidential
    hpcml-fcache asof /tmp/demo/churn.h5 --requests /tmp/demo/requests.csv \
        --entity customer --time as_of --label churned_next_month
"""
import argparse
import bisect
import datetime
import math
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

    rows = []  # (customer, time, tenure, spend, calls, days_since_login)
    for _ in range(a.rows):
        rows.append((rng.randrange(a.entities), rng.randrange(span), rng.randrange(1, 72),
                     round(rng.uniform(5, 150), 2), rng.randrange(0, 10), rng.randrange(0, 60)))
    with open(os.path.join(a.out, "features.csv"), "w") as f:
        f.write("customer,event_time,tenure_months,monthly_spend,support_calls,days_since_login\n")
        for c, t, tenure, spend, calls, days in rows:
            f.write(f"{c},{iso(t)},{tenure},{spend:.2f},{calls},{days}\n")
    history = {}  # customer -> sorted times and their rows
    for r in sorted(rows, key=lambda r: (r[0], r[1])):
        times, feats = history.setdefault(r[0], ([], []))
        times.append(r[1])
        feats.append(r[2:])

    def churn_probability(c, t):
        times, feats = history.get(c, ([], []))
        i = bisect.bisect_right(times, t)
        if i == 0:
            return 0.2
        tenure, spend, calls, days = feats[i - 1]
        z = (-1.7 + 0.45 * (calls - 4.5) + 0.05 * (days - 30) - 0.03 * (tenure - 36)
             + 0.01 * (spend - 77) + 1.2 * (calls >= 7 and days >= 40))
        return 1 / (1 + math.exp(-z))

    with open(os.path.join(a.out, "requests.csv"), "w") as f:
        f.write("customer,as_of,churned_next_month\n")
        for _ in range(a.requests):
            c, t = rng.randrange(a.entities), rng.randrange(span)
            f.write(f"{c},{iso(t)},{int(rng.random() < churn_probability(c, t))}\n")
    print(f"wrote {a.rows} feature rows and {a.requests} requests to {a.out}")


if __name__ == "__main__":
    main()
