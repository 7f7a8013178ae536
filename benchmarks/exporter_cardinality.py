# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Series and bytes of one scrape of the agent's Prometheus endpoint.

Builds the state document of a host with 200 instances as the agent does
(:func:`rdt_virt.agent.publish.build`), with a mix like a busy host's:

* one in five instances without RDT extra specs (monitored in the default
  group); the others in shared bandwidth groups at seven percentages (some
  rounded up from the flavor's request), with dedicated L3 cache (held in
  whole ways, some with the request beside it) or with an MBps limit in a
  group of their own;
* one in ten high priority, one in four low priority, the rest normal;
  the controller holds half of the low ones at a level, over two memory
  bandwidth domains;
* 184 instances with rates, the others rotated out (the reference host's
  RMID budget);
* every instance owned by one of 20 projects (Keystone ids: 32 hex
  digits).

It renders the endpoint with prometheus_client's ``generate_latest``
(what a scrape receives), without the project label (the endpoint before
it had one) and with it, and prints both side by side: the series, those
per instance, the bytes of the scrape and gzipped (what travels when the
scraper asks for gzip, as Prometheus does), and the ratios. The project
label adds no series (an instance has one project); it makes each
per-instance series longer. Nothing is timed.

Run::

    python benchmarks/exporter_cardinality.py [--instances 200]
        [--projects 20] [--instance-names] [--energy]
"""

import argparse
import gzip
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from prometheus_client import exposition  # noqa: E402
from prometheus_client import parser  # noqa: E402

from rdt_virt.agent import energy as energy_mod  # noqa: E402
from rdt_virt.agent import model  # noqa: E402
from rdt_virt.agent import publish  # noqa: E402
from rdt_virt.agent import rotation  # noqa: E402
from rdt_virt.agent import sampler  # noqa: E402
from rdt_virt.telemetry import prometheus  # noqa: E402

#: Monitoring groups at once on the reference host (its RMID budget).
MON_BUDGET = 184
PERCENTS = (10, 20, 30, 40, 50, 60, 70)
#: L3 held per way on the reference host, KiB.
WAY_KIB = 3328
DOMAINS = (0, 1)
TOTALS = {'ticks': 1234, 'writes': 56, 'errors': 0, 'events': 78,
          'tick_cpu': 0.005}
WITHOUT = 'without project label'
WITH = 'with project label'
#: What the last run rendered, for the smoke test: {column: figures}.
LAST_RUN = {}


def uuid_of(i):
    return '%08x-0000-4000-8000-%012x' % (i, i)


def make_host(count, projects, with_energy=False, seed=42):
    """The agent's state document for ``count`` instances."""
    rand = random.Random(seed)
    owners = ['%032x' % rand.getrandbits(128) for _ in range(projects)]
    instances, placements, rates = {}, {}, {}
    levels, limits, pending, figures = {}, {}, {}, {}
    for i in range(count):
        uuid = uuid_of(i)
        name = 'instance-%08x' % (i + 1)
        priority = ('high' if i % 10 == 0 else
                    'low' if i % 4 == 1 else 'normal')
        bandwidth, policy = None, {}
        group = None
        kind = i % 5
        if kind == 0:
            pass                    # no RDT extra spec: default group
        elif kind in (1, 2):
            pct = PERCENTS[i % len(PERCENTS)]
            bandwidth = model.BandwidthPolicy('percent', pct, pct,
                                              model.SHARED)
            policy = {'mem_bw': pct}
            if i % 3 == 0:
                policy['mem_bw_requested'] = pct - 5
            group = 'rdtvirt-mb%d' % pct
        elif kind == 3:
            ways = 1 + i % 3
            policy = {'cache_l3': ways * WAY_KIB}
            if i % 2:
                policy['cache_l3_requested'] = ways * WAY_KIB - 1024
            group = 'qemu-%d-%s-vcpus_0-3' % (i + 1, name)
        else:
            mbps = 1000 * (1 + i % 4)
            bandwidth = model.BandwidthPolicy('MBps', mbps, mbps,
                                              model.INSTANCE)
            policy = {'mem_bw_mbps': mbps}
            group = 'rdtvirt-i-%s' % uuid
        instances[uuid] = model.Instance(
            uuid, name, i + 1, bandwidth=bandwidth, monitor=True,
            policy=policy, priority=priority,
            project_id=owners[i % projects])
        mon = 'rdtvirt-m-%s' % uuid
        counted = i < MON_BUDGET
        placements[uuid] = model.Placement(
            uuid, group, mon if counted else None,
            counters=(group, mon) if counted else None,
            reason=None if counted else 'rotated out (RMID budget)')
        if counted:
            total = rand.uniform(0.01, 0.5) * 1e9
            rates[uuid] = sampler.Rates(total, total * 0.8,
                                        rand.randrange(1, 40) * 2 ** 20)
            if with_energy:
                figures[uuid] = energy_mod.Energy(
                    rand.uniform(1, 20), rand.uniform(1e3, 1e5),
                    rand.uniform(1, 10))
        else:
            rates[uuid] = sampler.Rates(reason='rotated out (RMID budget)')
            if with_energy:
                figures[uuid] = energy_mod.Energy(reason='rotated out')
        if priority == 'low':
            held = i % 8 == 1
            levels[uuid] = 30 if held else None
            limits[uuid] = 30 if held else policy.get('mem_bw', 100)
            pending[uuid] = 20 if held and i % 16 == 1 else levels[uuid]
    rot = rotation.Rotation(60)
    rot.update(sorted(instances), MON_BUDGET, 0)
    controller = {'enabled': True, 'unit': 'percent', 'period': 10.0,
                  'domains': {str(d): {
                      'members': [d], 'pressure': 0.91,
                      'capacity_bps': 1.2e11, 'capacity_source': 'learned',
                      'throttled': len([u for u in levels if levels[u]]) // 2,
                      'active_high': 3} for d in DOMAINS}}
    return publish.build(
        1795330000.5, 10.0, instances, placements, rates, rot,
        rmids_total=256, rmids_used=MON_BUDGET + 8, closids_total=16,
        closids_used=12, mon_budget=MON_BUDGET,
        extra={'bandwidth_ceiling_bps': 4e11, 'counter_resets': 0,
               'controller': controller},
        energy=figures if with_energy else None, levels=levels,
        limits=limits, pending=pending)


def render(doc, project_label, instance_names=False):
    """The scrape's body, as ``generate_latest`` writes it."""
    registry = prometheus.registry_for(
        lambda: doc, lambda: TOTALS, instance_names=instance_names,
        project_label=project_label)
    return exposition.generate_latest(registry)


def figures(body, project_label):
    """``{series, instance_series, bytes, gzip_bytes, keys}``."""
    series = instance = 0
    keys = set()
    for family in parser.text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            series += 1
            if sample.name.startswith('rdt_virt_instance_'):
                instance += 1
            labels = dict(sample.labels)
            labels.pop(project_label, None)
            keys.add((sample.name, tuple(sorted(labels.items()))))
    return {'series': series, 'instance_series': instance,
            'bytes': len(body), 'gzip_bytes': len(gzip.compress(body)),
            'keys': keys}


def main(argv=None):
    arg_parser = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    arg_parser.add_argument('--instances', type=int, default=200)
    arg_parser.add_argument('--projects', type=int, default=20)
    arg_parser.add_argument(
        '--instance-names', action='store_true',
        help='with [rdt_agent] prometheus_instance_names')
    arg_parser.add_argument(
        '--energy', action='store_true',
        help='a host with package telemetry (Intel AET)')
    args = arg_parser.parse_args(argv)
    doc = make_host(args.instances, max(1, args.projects), args.energy)
    LAST_RUN.clear()
    for column, label in ((WITHOUT, None),
                          (WITH, prometheus.PROJECT_LABEL)):
        LAST_RUN[column] = figures(
            render(doc, label, args.instance_names), label)
    without, with_ = LAST_RUN[WITHOUT], LAST_RUN[WITH]
    print('%d instances, %d projects%s%s' % (
        args.instances, max(1, args.projects),
        ', instance names' if args.instance_names else '',
        ', package telemetry' if args.energy else ''))
    print('%-24s %14s %14s %8s' % ('', 'without label', 'with label',
                                   'ratio'))
    for key, text in (('series', 'series'),
                      ('instance_series', 'per-instance series'),
                      ('bytes', 'scrape bytes'),
                      ('gzip_bytes', 'scrape bytes, gzip')):
        print('%-24s %14d %14d %8.3f' % (
            text, without[key], with_[key],
            with_[key] / without[key] if without[key] else 0.0))
    per = (with_['bytes'] - without['bytes']) / max(
        1, with_['instance_series'])
    print('bytes the label adds per per-instance series: %.1f' % per)
    same = without['keys'] == with_['keys']
    print('same series apart from the label: %s' % ('yes' if same else 'NO'))
    return 0 if same else 1


if __name__ == '__main__':
    sys.exit(main())
