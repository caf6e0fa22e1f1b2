"""Rebuilds data/places.csv and data/series.csv from the registry packages.

Run from the repository root with the three wheels unpacked into one
directory:

    pip download --no-deps -d /tmp/pkgs plotly==7.1.0 statsmodels==0.15.0 bokeh_sampledata==2026.1
    (cd /tmp/pkgs && mkdir -p x && cd x && for w in ../*.whl; do unzip -o -q "$w"; done)
    python3 data/build.py /tmp/pkgs/x

Sources: life expectancy and population from bokeh_sampledata's Gapminder
table (yearly, 1964-2013); GDP per capita from plotly's Gapminder table
(five-yearly, 1952-2007); fertility rate (World Bank) and the US state
figures from statsmodels. Deterministic: the same wheels give
byte-identical files.
"""
import csv
import gzip
import io
import sys
from collections import defaultdict

root = sys.argv[1]
GAP = f"{root}/plotly/package_data/datasets/gapminder.csv.gz"
FERT = f"{root}/statsmodels/datasets/fertility/fertility.csv"
CRIME = f"{root}/statsmodels/datasets/statecrime/statecrime.csv"
BOKEH = f"{root}/bokeh_sampledata/_data/gapminder.csv.gz"

# Continents (Gapminder's five) for World Bank rows Gapminder does not list.
EXTRA_CONTINENT = {
    "ABW": "Americas", "AND": "Europe", "ARE": "Asia", "ARM": "Asia", "ASM": "Oceania",
    "ATG": "Americas", "AZE": "Asia", "BHS": "Americas", "BLR": "Europe", "BLZ": "Americas",
    "BMU": "Americas", "BRB": "Americas", "BRN": "Asia", "BTN": "Asia", "CHI": "Europe",
    "CPV": "Africa", "CUW": "Americas", "CYM": "Americas", "CYP": "Europe", "DMA": "Americas",
    "EST": "Europe", "FJI": "Oceania", "FRO": "Europe", "FSM": "Oceania", "GEO": "Asia",
    "GRD": "Americas", "GRL": "Americas", "GUM": "Oceania", "GUY": "Americas", "HKG": "Asia",
    "IMN": "Europe", "KAZ": "Asia", "KGZ": "Asia", "KIR": "Oceania", "KNA": "Americas",
    "KSV": "Europe", "LAO": "Asia", "LCA": "Americas", "LIE": "Europe", "LTU": "Europe",
    "LUX": "Europe", "LVA": "Europe", "MAC": "Asia", "MAF": "Americas", "MCO": "Europe",
    "MDA": "Europe", "MDV": "Asia", "MHL": "Oceania", "MKD": "Europe", "MLT": "Europe",
    "MNP": "Oceania", "NCL": "Oceania", "PLW": "Oceania", "PNG": "Oceania", "PYF": "Oceania",
    "QAT": "Asia", "RUS": "Europe", "SLB": "Oceania", "SMR": "Europe", "SSD": "Africa",
    "SUR": "Americas", "SXM": "Americas", "SYC": "Africa", "TCA": "Americas", "TJK": "Asia",
    "TKM": "Asia", "TLS": "Asia", "TON": "Oceania", "TUV": "Oceania", "UKR": "Europe",
    "UZB": "Asia", "PRK": "Asia", "KOR": "Asia", "COD": "Africa", "COG": "Africa", "MNG": "Asia", "YEM": "Asia", "ZMB": "Africa", "ZWE": "Africa", "VCT": "Americas", "VIR": "Americas", "VUT": "Oceania", "WSM": "Oceania",
}
WB_GROUPS = {"CAA", "LCN", "OED", "OSS", "PSS"}
# Territories Data Commons types Country + AdministrativeArea1 (no NUTS type).
TERRITORY_PARENT = {"HKG": "CHN", "MAC": "CHN", "GRL": "DNK", "GUM": "USA", "PRI": "USA",
                    "VIR": "USA", "ASM": "USA", "MNP": "USA", "FRO": "DNK", "ABW": "NLD",
                    "CUW": "NLD", "SXM": "NLD", "NCL": "FRA", "PYF": "FRA", "MAF": "FRA",
                    "BMU": "GBR", "CYM": "GBR", "TCA": "GBR", "IMN": "GBR", "CHI": "GBR"}
ALIASES = {
    "USA": ["United States of America", "USA", "US", "America"], "GBR": ["UK", "Britain", "Great Britain"],
    "EGY": ["Egypt"], "IRN": ["Iran"], "RUS": ["Russia"], "KOR": ["South Korea", "Korea"],
    "PRK": ["North Korea"], "SYR": ["Syria"], "VEN": ["Venezuela"], "YEM": ["Yemen"],
    "GMB": ["Gambia", "The Gambia"], "BHS": ["Bahamas"], "KGZ": ["Kyrgyzstan"], "LAO": ["Laos"],
    "SVK": ["Slovakia"], "CZE": ["Czechia"], "MKD": ["North Macedonia", "Macedonia"],
    "COD": ["DRC", "DR Congo", "Democratic Republic of the Congo"], "COG": ["Republic of the Congo"],
    "HKG": ["Hong Kong"], "MAC": ["Macao", "Macau"], "CIV": ["Ivory Coast", "Cote d'Ivoire"],
    "VNM": ["Viet Nam"], "FSM": ["Micronesia"], "BRN": ["Brunei"], "CPV": ["Cape Verde"],
    "SWZ": ["Eswatini"], "TUR": ["Turkiye"], "PSE": ["Palestine"], "TWN": ["Taiwan"],
    "MMR": ["Burma"], "TLS": ["East Timor"], "KNA": ["Saint Kitts and Nevis"],
    "LCA": ["Saint Lucia"], "VCT": ["Saint Vincent"], "NLD": ["Holland"],
    "VAT": ["Vatican", "Vatican City"], "FLK": ["Falkland Islands", "Falklands"],
    "PCN": ["Pitcairn Islands"], "SPM": ["Saint Pierre and Miquelon"],
    "WLF": ["Wallis and Futuna"],
}
# bokeh_sampledata's Gapminder names that match no place name, alias or
# World Bank name.
BOKEH_CODE = {
    "Central African Rep.": "CAF", "Czech Rep.": "CZE", "Dominican Rep.": "DOM",
    "Macao, China": "MAC", "Saint Vincent and the Grenadines": "VCT",
}
# Places bokeh's table holds that no other source lists: code, continent
# (Gapminder's five) and, for a dependent territory, its state.
BOKEH_NEW = {
    "Anguilla": ("AIA", "Americas", "GBR"),
    "British Virgin Islands": ("VGB", "Americas", "GBR"),
    "Cook Islands": ("COK", "Oceania", "NZL"),
    "Falkland Islands (Malvinas)": ("FLK", "Americas", "GBR"),
    "French Guiana": ("GUF", "Americas", None),
    "Gibraltar": ("GIB", "Europe", "GBR"),
    "Guadeloupe": ("GLP", "Americas", None),
    "Holy See": ("VAT", "Europe", None),
    "Martinique": ("MTQ", "Americas", None),
    "Mayotte": ("MYT", "Africa", None),
    "Montserrat": ("MSR", "Americas", "GBR"),
    "Nauru": ("NRU", "Oceania", None),
    "Niue": ("NIU", "Oceania", "NZL"),
    "Pitcairn": ("PCN", "Oceania", "GBR"),
    "Saint Helena": ("SHN", "Africa", "GBR"),
    "Saint-Pierre-et-Miquelon": ("SPM", "Americas", "FRA"),
    "Tokelau": ("TKL", "Oceania", "NZL"),
    "Wallis et Futuna": ("WLF", "Oceania", "FRA"),
    "Western Sahara": ("ESH", "Africa", None),
}
# bokeh rows left out, and why. Rows whose people Gapminder also counts in
# another row's figures are left out so that no one is counted twice, in
# the aggregates or in a total over countries. (Åland's rows are kept: it
# is a first-level subdivision, whose figures sit inside Finland's.)
BOKEH_DROP = {
    "Netherlands Antilles": "dissolved in 2010",
    "Northern Cyprus": "no figures",
    "Serbia excluding Kosovo": "inside Serbia's figures, which include Kosovo",
    "Kosovo": "inside Serbia's figures",
    "Guernsey": "inside the Channel Islands' figures",
    "Jersey": "inside the Channel Islands' figures",
    "Saint Barthélemy": "inside Guadeloupe's figures",
    "Saint Martin": "inside Guadeloupe's figures",
    "Svalbard": "inside Norway's figures",
    "Christmas Island": "inside Australia's figures",
    "Cocos Island": "inside Australia's figures",
    "Norfolk Island": "inside Australia's figures",
}
STATES = {
    "Alabama": "AL", "Alaska": "AK", "Arizona": "AZ", "Arkansas": "AR", "California": "CA",
    "Colorado": "CO", "Connecticut": "CT", "Delaware": "DE", "District of Columbia": "DC",
    "Florida": "FL", "Georgia": "GA", "Hawaii": "HI", "Idaho": "ID", "Illinois": "IL",
    "Indiana": "IN", "Iowa": "IA", "Kansas": "KS", "Kentucky": "KY", "Louisiana": "LA",
    "Maine": "ME", "Maryland": "MD", "Massachusetts": "MA", "Michigan": "MI", "Minnesota": "MN",
    "Mississippi": "MS", "Missouri": "MO", "Montana": "MT", "Nebraska": "NE", "Nevada": "NV",
    "New Hampshire": "NH", "New Jersey": "NJ", "New Mexico": "NM", "New York": "NY",
    "North Carolina": "NC", "North Dakota": "ND", "Ohio": "OH", "Oklahoma": "OK", "Oregon": "OR",
    "Pennsylvania": "PA", "Rhode Island": "RI", "South Carolina": "SC", "South Dakota": "SD",
    "Tennessee": "TN", "Texas": "TX", "Utah": "UT", "Vermont": "VT", "Virginia": "VA",
    "Washington": "WA", "West Virginia": "WV", "Wisconsin": "WI", "Wyoming": "WY",
}
CONTINENTS = ["Africa", "Americas", "Asia", "Europe", "Oceania"]

places = {}  # code -> [name, types, parent, aliases]
series = defaultdict(dict)  # (indicator, code) -> {year: value}

with gzip.open(GAP, "rt") as f:
    gap = list(csv.DictReader(f))
continent_of = {}
plotly_pop = defaultdict(dict)  # code -> {year: people}; weights before 1964 only
for row in gap:
    code = row["iso_alpha"]
    if row["country"] == "Korea, Dem. Rep.":
        code = "PRK"  # plotly's table codes both Koreas KOR; ISO 3166 says PRK
    continent_of[code] = row["continent"]
    places[code] = [row["country"], ["Country"], "continent/" + row["continent"], []]
    y = int(row["year"])
    series[("gdp_per_capita", code)][y] = float(row["gdpPercap"])
    plotly_pop[code][y] = float(row["pop"])

with open(FERT) as f:
    rows = list(csv.reader(f))
years = [int(y) for y in rows[0][4:]]
wb_code = {}  # World Bank name -> code
for row in rows[1:]:
    name, code = row[0], row[1]
    wb_code[name] = code
    if code in WB_GROUPS:
        places[code] = [name, ["WorldBankGroup"], "", []]
    elif code not in places:
        cont = continent_of.get(code) or EXTRA_CONTINENT.get(code)
        if cont is None:
            sys.exit(f"no continent for {code} {name}")
        continent_of[code] = cont
        places[code] = [name, ["Country"], "continent/" + cont, []]
    for y, v in zip(years, row[4:]):
        if v:
            series[("fertility_rate", code)][y] = float(v)

for code, parent in TERRITORY_PARENT.items():
    if code in places:
        places[code][1] = ["Country", "AdministrativeArea1"]
        places[code][2] = parent
# Åland: typed Country and EurostatNUTS1 by Data Commons.
places["nuts/FI2"] = ["Åland", ["Country", "EurostatNUTS1"], "FIN", []]
if "FIN" not in places:
    sys.exit("Finland missing")

# Life expectancy and population: bokeh_sampledata's yearly Gapminder table.
for name, (code, cont, parent) in BOKEH_NEW.items():
    continent_of[code] = cont
    if parent:
        places[code] = [name, ["Country", "AdministrativeArea1"], parent, []]
    else:
        places[code] = [name, ["Country"], "continent/" + cont, []]
code_of = dict(wb_code)
for code, names in ALIASES.items():
    code_of.update((n, code) for n in names)
code_of.update((p[0], code) for code, p in places.items())
code_of.update(BOKEH_CODE)
with gzip.open(BOKEH, "rt", encoding="utf-8") as f:
    bokeh = list(csv.DictReader(f))
if set(BOKEH_DROP) - {row["country"] for row in bokeh}:
    sys.exit(f"not in bokeh's table: {set(BOKEH_DROP) - {row['country'] for row in bokeh}}")
for row in bokeh:
    if row["country"] in BOKEH_DROP:
        continue
    code = code_of.get(row["country"])
    if code not in places:
        sys.exit(f"no place for bokeh's {row['country']}")
    y = int(row["year"])
    for col, ind in [("life_expectancy", "life_expectancy"), ("population", "population")]:
        if row[col]:
            series[(ind, code)][y] = float(row[col])

for code, names in ALIASES.items():
    if code in places:
        places[code][3] = names
places["nuts/FI2"][3] = ["Aland", "Aland Islands", "Åland Islands"]

with open(CRIME) as f:
    for row in csv.DictReader(f):
        state = row["state"].strip()
        code = "US-" + STATES[state]
        places[code] = [state, ["AdministrativeArea1"], "USA", []]
        for col, ind in [("violent", "violent_crime_rate"), ("murder", "murder_rate"),
                         ("poverty", "poverty_rate"), ("hs_grad", "high_school_graduation")]:
            series[(ind, code)][2009] = float(row[col])

# Aggregates: World and the five continents.
places["Earth"] = ["World", ["World"], "", ["the world", "global", "globally", "worldwide"]]
for c in CONTINENTS:
    places["continent/" + c] = [c, ["Continent"], "Earth", ["America", "the Americas"] if c == "Americas" else []]

def linear(pts, year):
    """pts at year: linear between points, held at the ends."""
    if not pts:
        return None
    ys = sorted(pts)
    if year <= ys[0]:
        return pts[ys[0]]
    if year >= ys[-1]:
        return pts[ys[-1]]
    for a, b in zip(ys, ys[1:]):
        if a <= year <= b:
            return pts[a] + (pts[b] - pts[a]) * (year - a) / (b - a)

def pop_at(code, year):
    """Weight: bokeh's yearly Gapminder population; before its first year,
    plotly's five-yearly Gapminder population where plotly has the place."""
    pts = series.get(("population", code))
    if pts and year < min(pts) and code in plotly_pop:
        return linear(plotly_pop[code], year)
    return linear(pts, year)

countries = [c for c, p in places.items() if "Country" in p[1] and "EurostatNUTS1" not in p[1]]
groups = {"Earth": countries}
for c in CONTINENTS:
    groups["continent/" + c] = [k for k in countries if continent_of.get(k) == c]
for agg, members in groups.items():
    for y in sorted({y for k in members for y in series[("population", k)]}):
        vals = [series[("population", k)][y] for k in members if y in series[("population", k)]]
        series[("population", agg)][y] = sum(vals)
    for ind in ["life_expectancy", "gdp_per_capita", "fertility_rate"]:
        yrs = sorted({y for k in members for y in series.get((ind, k), {})})
        for y in yrs:
            num = den = 0.0
            for k in members:
                v = series.get((ind, k), {}).get(y)
                w = pop_at(k, y) if v is not None else None
                if v is not None and w:
                    num += v * w
                    den += w
            if den:
                series[(ind, agg)][y] = num / den

out = io.StringIO()
w = csv.writer(out, lineterminator="\n")
w.writerow(["code", "name", "types", "parent", "aliases"])
for code in sorted(places):
    name, types, parent, aliases = places[code]
    w.writerow([code, name, ";".join(types), parent, ";".join(aliases)])
open("data/places.csv", "w").write(out.getvalue())

def fmt(v):
    s = f"{v:.6g}" if abs(v) < 1e6 else f"{v:.0f}"
    return s

out = io.StringIO()
w = csv.writer(out, lineterminator="\n")
w.writerow(["indicator", "place", "observations"])
for (ind, code) in sorted(series):
    pts = series[(ind, code)]
    if pts:
        w.writerow([ind, code, " ".join(f"{y}={fmt(pts[y])}" for y in sorted(pts))])
open("data/series.csv", "w").write(out.getvalue())
print(len(places), "places,", len(series), "series")
