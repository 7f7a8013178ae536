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

"""What the upgrade reads of the cloud, and a sampler that reads during a step.

The readers that must keep working while a service is down read the
hosts' files, not the APIs: resctrl (the sandbox's tree), the guests'
console logs (the instance directories) and the exporters. Their records
go to :mod:`rdt_virt.cloud.upgrade_checks`.
"""

import json
import os
import threading
import time
import urllib.parse
import urllib.request

from rdt_virt.cloud import services
from rdt_virt.sandbox import guest

#: resctrl entries at the top of the tree that are not control groups.
NOT_GROUPS = ('info', 'mon_groups', 'mon_data')


def _read(path):
    with open(path) as f:
        return f.read()


def groups(root):
    """The control groups (not the default one) under a resctrl root."""
    return sorted(n for n in os.listdir(root) if n not in NOT_GROUPS and
                  os.path.isdir(os.path.join(root, n)))


def threads(root, keep=lambda group: True):
    """{thread id: group} of the threads in the groups ``keep`` takes.

    A thread in the default group is in none of them.
    """
    found = {}
    for group in groups(root):
        if not keep(group):
            continue
        try:
            for tid in _read(os.path.join(root, group, 'tasks')).split():
                found[tid] = group
        except FileNotFoundError:
            pass        # removed while read
    return found


def schemata(root):
    """{group: schemata text} of every control group."""
    found = {}
    for group in groups(root):
        try:
            found[group] = _read(os.path.join(root, group, 'schemata'))
        except FileNotFoundError:
            pass
    return found


def alive(tids):
    """The thread ids of ``tids`` that still exist on this machine."""
    return {t for t in tids if os.path.exists('/proc/%s' % t)}


def work_units(layout, host, uuid):
    """Units of work a "work" guest has logged, from its console log file.

    Read from the host's instance directory, not through Nova's API, which
    an upgrade step may have stopped.
    """
    path = os.path.join(services.instances_dir(layout, host), uuid,
                        'console.log')
    try:
        with open(path, errors='replace') as f:
            return guest.work_units(f.read())
    except OSError:
        return None


def exporter(url, names, timeout=5):
    """{(metric, labels as a sorted tuple): value} of ``names`` at ``url``.

    None while the exporter does not answer (its process restarting).
    """
    from prometheus_client import parser
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    found = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in names:
                found[sample.name, tuple(sorted(sample.labels.items()))] = (
                    sample.value)
    return found


def agent_counters(layout, host):
    """(ticks, writes) the agent on ``host`` counts, or None."""
    url = 'http://127.0.0.1:%d/metrics' % layout.ports['agent_prom_%s' %
                                                       host]
    found = exporter(url, ('rdt_virt_agent_ticks_total',
                           'rdt_virt_agent_writes_total'))
    if not found:
        return None
    values = {name: value for (name, _), value in found.items()}
    if len(values) < 2:
        return None
    return (int(values['rdt_virt_agent_ticks_total']),
            int(values['rdt_virt_agent_writes_total']))


def prometheus_samples(layout, selector, start, end):
    """[(labels, [(timestamp, value)])] of ``selector`` in [start, end].

    Prometheus's own HTTP API (no Keystone: the admin's view, on
    loopback), a range vector at ``end``: every scrape that found the
    series, not values filled in by a range query's lookback.
    """
    seconds = max(1, int(end - start + 0.999))
    query = urllib.parse.urlencode({'query': '%s[%ds]' % (selector, seconds),
                                    'time': '%.3f' % end})
    url = 'http://127.0.0.1:%d/api/v1/query?%s' % (
        layout.ports['prometheus'], query)
    with urllib.request.urlopen(url, timeout=30) as resp:
        doc = json.load(resp)
    return [(r['metric'], [(float(t), float(v)) for t, v in r['values']])
            for r in doc['data']['result']]


def prometheus_series(layout, selector, start, end):
    """[(labels, [timestamps])] of ``selector``'s raw samples in [start, end].

    As :func:`prometheus_samples`, without the values.
    """
    return [(labels, [t for t, _ in points]) for labels, points in
            prometheus_samples(layout, selector, start, end)]


class Sampler(threading.Thread):
    """Calls ``read`` every ``interval`` seconds until stopped.

    ``samples`` holds (wall-clock seconds, what ``read`` returned); an
    exception is kept as None, so that a reading that failed while a
    service restarted shows as missing rather than ending the sampling.
    """

    def __init__(self, read, interval):
        super().__init__(daemon=True)
        self.read = read
        self.interval = interval
        self.samples = []
        self._done = threading.Event()

    def run(self):
        while not self._done.is_set():
            now = time.time()
            try:
                value = self.read()
            except Exception:   # noqa: BLE001 - kept as a missing sample
                value = None
            self.samples.append((now, value))
            self._done.wait(self.interval)

    def stop(self):
        self._done.set()
        if self.ident is not None:     # started
            self.join()
        return self.samples
