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

"""Gnocchi for the cloud's telemetry: indexer in PostgreSQL, file storage.

Gnocchi runs from its own virtual environment (it is released apart from
OpenStack's coordinated cycle and pins its own dependencies): the API under
uWSGI with Gnocchi's WSGI module, and one ``gnocchi-metricd`` that turns the
incoming measures into aggregates every ``processing_delay`` seconds.
"""

import configparser
import os
import urllib.request

from rdt_virt.cloud import process

API = 'gnocchi-api'
METRICD = 'gnocchi-metricd'


def write_conf(path, indexer_url, state_dir, auth_mode='basic',
               processing_delay=2, extra=None):
    """gnocchi.conf for one machine; ``extra``: {section: {option: value}}."""
    conf = configparser.RawConfigParser()
    sections = {
        'DEFAULT': {'debug': 'false', 'use_stderr': 'true'},
        'indexer': {'url': indexer_url},
        'storage': {'driver': 'file',
                    'file_basepath': os.path.join(state_dir, 'storage')},
        'incoming': {'driver': 'file',
                     'file_basepath': os.path.join(state_dir, 'incoming')},
        'api': {'auth_mode': auth_mode},
        'metricd': {'workers': '1',
                    'metric_processing_delay': str(processing_delay),
                    'metric_cleanup_delay': '60'},
    }
    for section, options in (extra or {}).items():
        sections.setdefault(section, {}).update(options)
    for section, options in sections.items():
        if section != 'DEFAULT':
            conf.add_section(section)
        for key, value in options.items():
            conf.set(section, key, value)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        conf.write(f)
    return path


class Gnocchi(object):
    """Gnocchi's API and metricd, started from ``bin_dir`` (a venv's bin)."""

    def __init__(self, daemons, bin_dir, conf_file, port):
        self.daemons = daemons
        self.bin_dir = bin_dir
        self.conf_file = conf_file
        self.port = port

    @property
    def endpoint(self):
        return 'http://127.0.0.1:%d' % self.port

    def _bin(self, name):
        return os.path.join(self.bin_dir, name)

    def upgrade(self):
        """Create the indexer schema, storage and default policies."""
        process.run([self._bin('gnocchi-upgrade'), '--config-file',
                     self.conf_file, '--sacks-number', '8'],
                    log=self.daemons.log_file('gnocchi-upgrade'))

    def start(self, timeout=180):
        venv = os.path.dirname(self.bin_dir)
        # Gnocchi's keystonemiddleware filter reads its options from the
        # project's default files only (~/.gnocchi/gnocchi.conf,
        # /etc/gnocchi/...), not from --config-file: give the API a home
        # whose default file is this one.
        home = os.path.join(os.path.dirname(self.conf_file), 'home')
        os.makedirs(os.path.join(home, '.gnocchi'), exist_ok=True)
        link = os.path.join(home, '.gnocchi', 'gnocchi.conf')
        if not os.path.lexists(link):
            os.symlink(self.conf_file, link)
        self.daemons.start(API, [
            self._bin('uwsgi'), '--http-socket', '127.0.0.1:%d' % self.port,
            '--master', '--die-on-term', '--enable-threads',
            '--processes', '1', '--threads', '4', '--lazy-apps',
            '--virtualenv', venv, '--chdir', '/',
            '--module', 'gnocchi.rest.wsgi',
            # An http-socket closes the connection after each response:
            # tell the clients, or they reuse it and see it reset.
            '--add-header', 'Connection: close',
            '--pyargv', '--config-file %s' % self.conf_file],
            env=dict(os.environ, HOME=home), marker='gnocchi.rest.wsgi')
        self.daemons.start(METRICD, [
            self._bin('gnocchi-metricd'), '--config-file', self.conf_file],
            marker='gnocchi-metricd')
        self.daemons.wait(API, self.healthy, timeout, 'answer /v1/status')
        return self

    def healthy(self):
        try:
            req = urllib.request.Request(self.endpoint + '/',
                                         headers={'Accept':
                                                  'application/json'})
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def stop(self):
        self.daemons.stop(METRICD)
        self.daemons.stop(API)
