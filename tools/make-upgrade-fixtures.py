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

"""Write each record rdt-virt's parts exchange, as this release writes it.

The files go to ``tests/fixtures/upgrade/`` and are committed; the tests
(``tests/unit/*/test_upgrade.py``, ``tests/watcher/test_upgrade.py``) read
them, so that a later change of a writer that a reader one release older
can no longer read fails there. Names are ``<record>-v<version>-<case>``.

Run it once per new form of a record, with the code that writes that
form, in an environment with Nova and python-watcher (``tox -e cloud``'s)::

    .tox/cloud/bin/python tools/make-upgrade-fixtures.py

It never replaces a file that exists: a committed fixture is the form a
released rdt-virt wrote, whatever the code writes today (``--force`` is
for a form not released yet).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# This checkout's code, not that of an rdt-virt installed in the
# environment.
sys.path.insert(0, TOP)

from rdt_virt.agent import controller as ctl  # noqa: E402
from rdt_virt.agent import model  # noqa: E402
from rdt_virt.agent import protection  # noqa: E402
from rdt_virt.agent import publish  # noqa: E402
from rdt_virt.agent import sampler  # noqa: E402
from rdt_virt.agent import state as state_mod  # noqa: E402
from rdt_virt import conf  # noqa: E402
from rdt_virt.libvirt import elements  # noqa: E402
from rdt_virt.policy import extra_specs  # noqa: E402
from rdt_virt.policy import hoststats  # noqa: E402
from rdt_virt.policy import placement  # noqa: E402
from rdt_virt.resctrl import fs  # noqa: E402

TREES = os.path.join(TOP, 'tests', 'fixtures', 'resctrl')
OUT = os.path.join(TOP, 'tests', 'fixtures', 'upgrade')

U1 = '11111111-1111-4111-8111-111111111111'
U2 = '22222222-2222-4222-8222-222222222222'
PROJECT = '5e0d2f4a9c1b4d7e8f60a1b2c3d4e5f6'
# A fixed time, so that a reader's staleness is the test's to choose.
TIME = 1767225600.0
GB = 10 ** 9

DOMAIN = '''<domain type='kvm' id='7'>
  <name>instance-00000007</name>
  <uuid>%s</uuid>
  <metadata>
    <nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
      <nova:name>vm</nova:name>
      <nova:owner>
        <nova:user uuid="0f1e2d3c4b5a69788796a5b4c3d2e1f0">u</nova:user>
        <nova:project uuid="%s">p</nova:project>
      </nova:owner>
    </nova:instance>
  </metadata>
  <vcpu placement='static'>%d</vcpu>
</domain>'''

# (case, resctrl tree, strategy, flavor extra specs, vCPUs)
DOMAINS = (
    ('shared-percent', 'reference', 'shared', {'hw:mem_bw': '25'}, 2),
    ('libvirt-cache-percent', 'reference', 'per-instance',
     {'hw:cache_l3': '4096', 'hw:mem_bw': '50'}, 4),
    ('cdp', 'cdp', 'per-instance',
     {'hw:cache_l3_code': '1024', 'hw:cache_l3_data': '2048'}, 2),
    ('mbps-low', 'mba-mbps', 'per-instance',
     {'hw:mem_bw_mbps': '2000', 'hw:rdt_priority': 'low'}, 2),
    ('amd', 'amd', 'per-instance', {'hw:mem_bw_mbps': '1000'}, 2),
    ('high', 'reference', 'per-instance', {'hw:rdt_priority': 'high'}, 2),
    ('unmonitored', 'reference', 'shared',
     {'hw:mem_bw': '10', 'hw:rdt_monitor': 'false'}, 2),
)

# Flavors an operator sets up as ``rdt-virt flavor-audit`` tells.
FLAVORS = {
    'cache': {'hw:cache_l3': '4096'},
    'cdp': {'hw:cache_l3_code': '1024', 'hw:cache_l3_data': '1024'},
    'mem-bw': {'hw:mem_bw': '10'},
    'mbps': {'hw:mem_bw_mbps': '1000'},
    'high': {'hw:rdt_priority': 'high'},
    'low': {'hw:rdt_priority': 'low'},
    'monitor': {'hw:rdt_monitor': 'true'},
}


def resctrl(tree):
    # No kernel release: the tree's own figures, whatever this machine runs.
    return fs.Resctrl(os.path.join(TREES, tree),
                      osrelease=os.path.join(TREES, tree, 'no-osrelease'))


def host_state(tree):
    from nova_plugin.virt import host as host_mod
    return host_mod.read_resctrl(resctrl(tree))


def compute_stats():
    """The ``rdt_virt`` compute node stats, as the driver reports them."""
    from nova_plugin.virt import report
    cases = (
        ('reference', 'reference', 'per-instance', 1.2 * GB,
         {0: (1, 2), 1: (1, 2)}, frozenset((U1, U2))),
        # A report taken as an instance left: no claimed instances.
        ('reference-shared', 'reference', 'shared', None, {}, None),
        ('cdp', 'cdp', 'per-instance', None, {}, frozenset()),
        ('mba-mbps', 'mba-mbps', 'per-instance', 3.5e8, {0: (0, 1)},
         frozenset((U1,))),
        ('amd', 'amd', 'per-instance', None, {}, frozenset()),
        ('none', 'none', 'per-instance', None, {}, frozenset()),
    )
    for case, tree, strategy, mbw, classes, claimed in cases:
        state = host_state(tree)
        rdt = hoststats.HostRDT(
            caps=state.caps, capacity=state.capacity, strategy=strategy,
            monitoring=True, mbw=mbw, classes=classes, claimed=claimed)
        yield ('compute-stats-v%d-%s.json' % (hoststats.VERSION, case),
               _json(report.stats_of(rdt)))


def domain_metadata():
    """Live domain XML with what the driver writes for a flavor."""
    from rdt_virt.libvirt import config
    for case, tree, strategy, specs, vcpus in DOMAINS:
        caps = host_state(tree).caps
        xml = elements.insert(
            DOMAIN % (U1, PROJECT, vcpus),
            elements.for_flavor(specs, vcpus, caps, strategy=strategy))
        yield ('domain-metadata-v%d-%s.xml' % (config.METADATA_VERSION,
                                               case), xml + '\n')


def agent_state():
    """The agent's state file, with the bandwidth controller holding one.

    The controller's own state (levels, what each pool learned and gave)
    is persisted in this file: it is the controller record too.
    """
    caps = host_state('reference').caps
    conf.CONF([], project='rdt-virt', default_config_files=[])
    conf.CONF.set_override('memory_bandwidth_capacity', 10,
                           group='rdt_agent')
    prot = protection.Protection(conf.CONF.rdt_agent, lambda: 1000.0)
    low = model.Instance(U1, 'instance-00000001', 1, monitor=True,
                         priority=ctl.LOW, project_id=PROJECT,
                         bandwidth=model.BandwidthPolicy(
                             'percent', 60, 60, model.SHARED),
                         policy={'mem_bw': 60})
    high = model.Instance(U2, 'instance-00000002', 2, monitor=True,
                          priority=ctl.HIGH, project_id=PROJECT)
    instances = {U1: low, U2: high}
    rates = {U1: sampler.Rates(7 * GB, 6.5 * GB, 2.5e7,
                               total_by_domain={0: 7 * GB}),
             U2: sampler.Rates(3 * GB, 3 * GB, 1.2e7,
                               total_by_domain={0: 3 * GB})}
    prot.step(caps, instances, rates)
    # As published at the next tick, which put the level in force.
    group = 'rdtvirt-mb%d' % prot.levels[U1]
    placements = {
        U1: model.Placement(U1, group, 'rdtvirt-m-' + U1,
                            (group, 'rdtvirt-m-' + U1)),
        U2: model.Placement(U2, None, 'rdtvirt-m-' + U2,
                            (None, 'rdtvirt-m-' + U2)),
    }
    doc = publish.build(
        TIME, 10.0, instances, placements, rates, rmids_total=192,
        rmids_used=3, closids_total=8, closids_used=2, mon_budget=191,
        extra={'controller': prot.host_doc(), 'mba': True,
               'bandwidth_ceiling_bps': None, 'counter_resets': 0},
        levels=prot.levels, limits=prot.limits,
        pending=prot.levels)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'state.json')
        state_mod.write(path, doc)
        with open(path) as f:
            text = f.read()
    yield 'agent-state-v%d.json' % state_mod.VERSION, text + '\n'


def placement_records():
    """Traits and CLOSID inventory of each host, and flavors' keys."""
    from nova_plugin.virt import driver
    flavors = {}
    for name, specs in sorted(FLAVORS.items()):
        policy = extra_specs.from_extra_specs(specs)
        flavors[name] = dict(specs, **placement.expected(policy))
    for tree in ('reference', 'cdp', 'mba-mbps', 'amd', 'none'):
        state = host_state(tree)
        caps, cap = state.caps, state.capacity
        num = caps.kernel_closids
        record = placement.inventory(
            num, num - cap.free_closids if num > 0 else 0, 0)
        yield ('placement-v1-%s.json' % tree, _json({
            'resource_class': placement.RESOURCE_CLASS,
            'inventory': record,
            'traits': sorted(driver.traits_for(caps)),
            'flavors': flavors}))


def audit_parameters():
    """What Watcher stores for an audit of rdt_noisy_neighbor.

    Watcher's API fills the schema's defaults into the parameters of an
    audit when it is created, with its own validator; the decision engine
    hands exactly those to the strategy at every run of the audit.
    """
    from watcher.common import utils
    from watcher_plugin import strategy
    schema = strategy.RDTNoisyNeighbor.get_schema()
    for case, given in (('defaults', {}),
                        ('prometheus', {'datasources': ['prometheus'],
                                        'pressure_threshold': 0.9,
                                        'level_metric': ''})):
        params = dict(given)
        utils.StrictDefaultValidatingDraft4Validator(schema).validate(params)
        yield 'watcher-audit-parameters-v1-%s.json' % case, _json(params)


def _json(doc):
    return json.dumps(doc, indent=2, sort_keys=True) + '\n'


RECORDS = {
    'compute-stats': compute_stats,
    'domain-metadata': domain_metadata,
    'agent-state': agent_state,
    'placement': placement_records,
    'watcher-audit-parameters': audit_parameters,
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('records', nargs='*', metavar='RECORD',
                        help='records to write, of %s (default: all)'
                        % ', '.join(RECORDS))
    parser.add_argument('--force', action='store_true',
                        help='replace files that exist')
    args = parser.parse_args(argv)
    unknown = set(args.records) - set(RECORDS)
    if unknown:
        parser.error('unknown records: %s' % ', '.join(sorted(unknown)))
    if len(args.records) != 1:
        # One process per record: Watcher's and Nova's options share one
        # global configuration, and both register some of the same names.
        for record in args.records or RECORDS:
            subprocess.check_call([sys.executable, __file__, record] +
                                  (['--force'] if args.force else []))
        return 0
    os.makedirs(OUT, exist_ok=True)
    for record in args.records:
        for name, text in RECORDS[record]():
            path = os.path.join(OUT, name)
            if os.path.exists(path) and not args.force:
                print('kept %s' % os.path.relpath(path, TOP))
                continue
            with open(path, 'w') as f:
                f.write(text)
            print('wrote %s' % os.path.relpath(path, TOP))
    return 0


if __name__ == '__main__':
    sys.exit(main())
