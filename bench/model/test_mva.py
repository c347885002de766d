"""Tests of the M1 model's solver (bench/model/mva.py) and model (m1.py) against closed
forms and limits. Run: python3 -m unittest discover -s bench/model -p 'test_*.py'."""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import m1  # noqa: E402
from mva import mva, mva_schweitzer, machine_repairman_throughput  # noqa: E402


class MvaTest(unittest.TestCase):
    def test_single_queue_matches_machine_repairman(self):
        for d, z in ((1.0, 4.0), (2.5, 1.0), (0.3, 10.0)):
            for n in (1, 2, 5, 17, 64):
                got = mva([("cpu", "queue", d), ("think", "delay", z)], n)["X"]
                want = machine_repairman_throughput(d, z, n)
                self.assertAlmostEqual(got, want, delta=1e-9 * want, msg="d=%g z=%g n=%d" % (d, z, n))

    def test_one_customer_sees_no_queueing(self):
        r = mva([("a", "queue", 3.0), ("b", "queue", 2.0), ("z", "delay", 5.0)], 1)
        self.assertAlmostEqual(r["R"], 10.0)
        self.assertAlmostEqual(r["X"], 0.1)

    def test_bounds_and_littles_law(self):
        cs = [("a", "queue", 3.0), ("b", "queue", 1.0), ("z", "delay", 6.0)]
        for n in range(1, 40):
            r = mva(cs, n)
            self.assertLessEqual(r["X"], min(n / 10.0, 1 / 3.0) + 1e-12)
            self.assertGreaterEqual(r["X"], n / (4.0 * n + 6.0) - 1e-12)  # pessimistic: n/(nD+Z)
            self.assertAlmostEqual(sum(r["q"].values()), n, places=9)
            self.assertLessEqual(r["u"]["a"], 1 + 1e-12)
        self.assertAlmostEqual(mva(cs, 200)["X"], 1 / 3.0, places=4)

    def test_two_equal_queues_closed_form(self):
        # Two identical queueing centres (demand d), no delay: X(n) = n / (d (n + 1)).
        for n in (1, 2, 3, 10):
            self.assertAlmostEqual(mva([("a", "queue", 1.0), ("b", "queue", 1.0)], n)["X"], n / (n + 1.0))

    def test_bad_input(self):
        with self.assertRaises(ValueError):
            mva([("a", "queue", 1.0)], 0)
        with self.assertRaises(ValueError):
            mva([("a", "queue", -1.0)], 2)
        with self.assertRaises(ValueError):
            mva([("a", "server", 1.0)], 2)

    def test_schweitzer_close_to_exact_single_class(self):
        cs = [("a", "queue", 3.0), ("z", "delay", 6.0)]
        for n in (1, 2, 8, 50):
            exact = mva(cs, n)["X"]
            approx = mva_schweitzer({"c": n}, [(a, k, {"c": d}) for a, k, d in cs])["c"]["X"]
            self.assertLess(abs(approx - exact) / exact, 0.06, msg="n=%d" % n)


class ModelTest(unittest.TestCase):
    def test_no_bus_no_lock_scales_linearly(self):
        p = m1.Params(d_tm=100.0, b_tm=0.0, z=0.0, locks=[])
        for n in (1, 2, 16, 256):
            self.assertAlmostEqual(m1.solve(p, n)["cycle_ns"], 100.0, places=6)

    def test_lock_bound(self):
        # A central lock held 10 ns of a 100 ns cycle: throughput never beats 1 / 10 ns.
        p = m1.Params(d_tm=90.0, b_tm=0.0, z=0.0, locks=[("readyq", 10.0, 0.0)])
        x = [m1.solve(p, n)["X"] for n in (1, 2, 8, 64, 256)]
        self.assertTrue(all(a <= b + 1e-15 for a, b in zip(x, x[1:])))
        self.assertLessEqual(x[-1], 1 / 10.0 + 1e-12)
        self.assertGreater(x[-1], 0.99 / 10.0)

    def test_bus_fit_reproduces_the_slowdown(self):
        for slow in (1.0, 1.05, 1.3, 1.9):
            b = m1.fit_bus_fraction(slow, 2)
            self.assertTrue(0 <= b <= 1)
            self.assertAlmostEqual(m1.bus_slowdown(b, 2), min(slow, m1.bus_slowdown(1.0, 2)), places=6)

    def test_spinning_processors_load_the_bus(self):
        base = m1.Params(d_tm=50.0, b_tm=0.2, z=0.0, locks=[("readyq", 20.0, 0.5)], spin_bus=0.0)
        spin = m1.Params(d_tm=50.0, b_tm=0.2, z=0.0, locks=[("readyq", 20.0, 0.5)], spin_bus=0.5)
        self.assertGreater(m1.solve(spin, 16)["cycle_ns"], m1.solve(base, 16)["cycle_ns"])
        self.assertTrue(m1.solve(spin, 16)["converged"])


if __name__ == "__main__":
    unittest.main()
