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

"""The reference scenario's chart, drawn with matplotlib (``rdt-virt[plot]``).

Left: the protected guest's work rate in each phase as a share of the alone
phase; right: every guest's memory bandwidth in each phase. Bars are means,
error bars one standard deviation over the phase's samples.

The chart takes plain data (see :func:`write`), not the scenario: what is
drawn can be built and tested apart from what runs the guests.
"""


class Unavailable(Exception):
    """matplotlib is not installed."""


def write(data, path):
    """Draw *data* into *path*.

    The format follows the file name's extension (``.png``, ``.svg``).

    :param data: ``{'title': str, 'guests': [name, ...], 'protected': name,
        'phases': [{'label': str, 'share': (mean, sd) or None, 'mbm':
        {name: (mean, sd) or None}}, ...]}``: shares are fractions of the
        alone phase, bandwidths bytes/s.
    :returns: *path*.
    :raises Unavailable: without matplotlib.
    """
    try:
        import matplotlib
        matplotlib.use('Agg')
        from matplotlib import pyplot
    except ImportError:
        raise Unavailable('matplotlib is not installed; pip install '
                          '"rdt-virt[plot]"')
    phases = data['phases']
    guests = data['guests']
    labels = [p['label'] for p in phases]
    fig, (left, right) = pyplot.subplots(
        1, 2, figsize=(13, 5), gridspec_kw={'width_ratios': [1, 2]})

    shares = [p.get('share') or (0.0, 0.0) for p in phases]
    xs = range(len(phases))
    left.bar(xs, [100 * s[0] for s in shares],
             yerr=[100 * s[1] for s in shares], capsize=4,
             color=['#4c72b0'] + ['#dd8452'] * (len(phases) - 1))
    left.set_xticks(list(xs))
    left.set_xticklabels([str(i + 1) for i in xs])
    left.set_ylabel('work rate, % of the alone phase')
    left.set_title('Protected guest')
    left.axhline(100, color='grey', linewidth=0.8, linestyle='--')

    width = 0.8 / len(guests)
    for g, name in enumerate(guests):
        means, errs = [], []
        for phase in phases:
            value = phase['mbm'].get(name)
            means.append(value[0] / 1e6 if value else 0.0)
            errs.append(value[1] / 1e6 if value else 0.0)
        right.bar([x - 0.4 + width * (g + 0.5) for x in xs], means, width,
                  yerr=errs, capsize=2, label=name,
                  color='#4c72b0' if name == data['protected'] else None)
    right.set_xticks(list(xs))
    right.set_xticklabels([str(i + 1) for i in xs])
    right.set_ylabel('memory bandwidth, MB/s (emulated MBM)')
    right.set_title('Every guest')
    right.legend(fontsize='small', ncol=2)
    fig.text(0.01, 0.01, '\n'.join(labels), fontsize='small', va='bottom')
    fig.suptitle(data['title'])
    fig.tight_layout(rect=(0, 0.12, 1, 0.95))
    fig.savefig(path)
    pyplot.close(fig)
    return path
