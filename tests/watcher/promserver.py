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

"""A real Prometheus on loopback, serving synthetic series.

The series are written as OpenMetrics, turned into TSDB blocks by
``promtool tsdb create-blocks-from openmetrics`` and served by
``prometheus`` over them, so that queries run in Prometheus's own PromQL
engine. Samples end a few seconds before the server starts: the strategy
asks instant queries at the server's "now", as Watcher's client does.

The scrape configuration lists one target per host, each with its host
label (``fqdn``), as an operator's scrape job of rdt-virt-agent does:
Watcher's datasource resolves hosts from the active targets' labels. The
targets are closed ports on loopback and their scrape interval an hour;
nothing is scraped.
"""

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request

import fixtures

INSTALL = ('prometheus and promtool are needed to test the strategy on a '
           'real Prometheus: apt-get install --no-install-recommends '
           'prometheus (Debian 12: 2.42; bindep.txt, profile test), and do '
           'not start its service')
STEP = 15


def missing():
    """What is not installed, or None."""
    gone = [tool for tool in ('prometheus', 'promtool')
            if not shutil.which(tool)]
    return '%s not found. %s' % (', '.join(gone), INSTALL) if gone else None


def _free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _labels(labels):
    return ','.join('%s="%s"' % (k, v) for k, v in sorted(labels.items()))


class Prometheus(fixtures.Fixture):
    """Prometheus serving ``series`` for the last ``span`` seconds.

    :param series: ``[(metric, {label: value}, value)]``; ``value`` is a
        number, or a function of a sample's age in seconds that returns
        a number or None (no sample).
    :param hosts: {host label value: target labels}, one target each.
    """

    def __init__(self, series, hosts, span=1800):
        super().__init__()
        self.series = series
        self.hosts = hosts
        self.span = span

    def _setUp(self):
        why = missing()
        if why:
            raise RuntimeError(why)
        self.dir = self.useFixture(fixtures.TempDir()).path
        data = os.path.join(self.dir, 'data')
        openmetrics = os.path.join(self.dir, 'series.om')
        with open(openmetrics, 'w') as f:
            f.write(self.openmetrics(int(time.time()) - 2))
        subprocess.run(['promtool', 'tsdb', 'create-blocks-from',
                        'openmetrics', openmetrics, data],
                       check=True, capture_output=True)
        config = os.path.join(self.dir, 'prometheus.yml')
        with open(config, 'w') as f:
            json.dump({'global': {'scrape_interval': '1h'},
                       'scrape_configs': [{
                           'job_name': 'rdt-virt-agent',
                           'static_configs': [
                               {'targets': ['127.0.0.1:%d' % (i + 1)],
                                'labels': labels}
                               for i, labels in enumerate(
                                   self.hosts.values())]}]}, f)
        self.port = _free_port()
        self.log = open(os.path.join(self.dir, 'prometheus.log'), 'w')
        self.addCleanup(self.log.close)
        self.process = subprocess.Popen(
            ['prometheus', '--config.file=' + config,
             '--storage.tsdb.path=' + data,
             '--web.listen-address=127.0.0.1:%d' % self.port],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.addCleanup(self.stop)
        self._wait_for_targets()

    @property
    def url(self):
        return 'http://127.0.0.1:%d' % self.port

    def openmetrics(self, now):
        families = {}
        for metric, labels, value in self.series:
            families.setdefault(metric, []).append((labels, value))
        lines = []
        for metric, members in families.items():
            lines.append('# TYPE %s gauge' % metric)
            for labels, value in members:
                for stamp in range(now - self.span, now + 1, STEP):
                    number = value(now - stamp) if callable(value) else value
                    if number is not None:
                        lines.append('%s{%s} %r %d' % (
                            metric, _labels(labels), float(number), stamp))
        lines.append('# EOF')
        return '\n'.join(lines) + '\n'

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=5) as resp:
            return json.load(resp)

    def _wait_for_targets(self, timeout=60):
        deadline = time.monotonic() + timeout
        wanted = len(self.hosts)
        last = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(self.url + '/-/ready',
                                            timeout=5):
                    pass
                targets = self.get('/api/v1/targets?state=active')
                if len(targets['data']['activeTargets']) >= wanted:
                    return
            except OSError as e:
                last = e
            time.sleep(0.2)
        self.stop()
        with open(self.log.name) as f:
            raise RuntimeError('Prometheus did not list its %d targets in '
                               '%d s (%s): %s' % (wanted, timeout, last,
                                                  f.read()[-2000:]))

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
