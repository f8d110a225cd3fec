"""The built-in datasets. Importing this module registers them.

Each loader receives a `LoadContext` and returns a PyG
``Data`` (``load_dataset`` then standardises dtypes, edges and splits). torch / PyG are
imported inside the loaders, so listing datasets stays light.
"""

from __future__ import annotations

from gnnprivacy.datasets.spec import register_dataset

P000 = "000: Xiang, Wang & Wang, Preserving Node-level Privacy in GNNs (HeterPoisson), IEEE S&P 2024"
P001 = "001: Tran et al., Heterogeneous Randomized Response for DP in GNNs (HeteroRR), IEEE BigData 2022"
P002 = "002: Node-Level Differentially Private GNNs (DP-GNN), anonymous ICLR-style submission"
P003 = "003: Lou et al., GRID: Protecting Training Graph from Link Stealing Attacks on GNN Models"
P004 = "004: Bhaila et al., LDP in GNNs: a Reconstruction Approach (RGNN)"

_PLANETOID_SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
TWITCH = ("DE", "EN", "ES", "FR", "PT", "RU")


def _source(subdir, raw_names, factory, **kw):
    from gnnprivacy.datasets.pyg_cache import PygSource

    return PygSource(subdir=subdir, required=tuple(f"raw/{n}" for n in raw_names), factory=factory, **kw)


def _raw(subdir, raw_names):
    return tuple(f"{subdir}/raw/{n}" for n in raw_names)


def _load(ctx, source):
    from gnnprivacy.datasets.pyg_cache import load_pyg_dataset

    return load_pyg_dataset(ctx, source)[0]


# --- Planetoid -----------------------------------------------------------------------------

#: (nodes, edge_index columns, features, classes) of each file-backed dataset as loaded
#: (measured on the shared raw files; the notes state the same figures), and the public
#: splits' (train, val, test): `load_dataset` refuses raw files that give anything else
SIZES = {
    "cora": (2708, 10556, 1433, 7), "citeseer": (3327, 9104, 3703, 6),
    "computers": (13752, 491722, 767, 10), "photo": (7650, 238162, 745, 8),
    "cs": (18333, 163788, 6805, 15), "physics": (34493, 495924, 8415, 5),
    "facebook": (22470, 341825, 4714, 4), "twitch-de": (9498, 315774, 3170, 2),
    "twitch-en": (7126, 77774, 3170, 2), "twitch-es": (4648, 123412, 3170, 2),
    "twitch-fr": (6549, 231881, 3170, 2), "twitch-pt": (1912, 64510, 3170, 2),
    "twitch-ru": (4385, 78993, 3170, 2),
}
PUBLIC_SIZES = {"cora": (140, 500, 1000), "citeseer": (120, 500, 1000)}


def _planetoid(name: str, pyg_name: str, paper_list, notes: str = "", default_split: str = "public"):
    files = [f"ind.{pyg_name.lower()}.{s}" for s in _PLANETOID_SUFFIXES]

    @register_dataset(
        name, description=f"{pyg_name} citation graph (Planetoid): bag-of-words features, paper topics",
        pyg_class=f"torch_geometric.datasets.Planetoid(root, {pyg_name!r})",
        raw_files=_raw(pyg_name, files), papers=tuple(paper_list), public_split=True,
        default_split=default_split, sizes=SIZES.get(name), public_sizes=PUBLIC_SIZES.get(name),
        notes=("split='public' is Planetoid's split (20 labelled nodes per class, 500 val, "
               "1000 test). " + notes))
    def load(ctx):
        from torch_geometric.datasets import Planetoid

        return _load(ctx, _source(pyg_name, files, lambda r: Planetoid(r, pyg_name)))

    return load


_planetoid("cora", "Cora", [P001, P003, P004], "2,708 nodes, 10,556 edge_index columns, 1,433 features, 7 classes.")
_planetoid("citeseer", "CiteSeer", [P003, P004],
           "3,327 nodes (15 ids missing from the raw test files get zero features and label 0, "
           "as in PyG), 9,104 "
           "edge_index columns, 3,703 features, 6 classes.")
_planetoid("pubmed", "PubMed", [P000, P003],
           "The shared offline copy lacks ind.pubmed.allx (kept under _incomplete/), so it is "
           "reported missing unless the file is supplied.", default_split="random")


# --- Amazon / Coauthor (gnn-benchmark npz) ------------------------------------------------

def _npz(name: str, subdir: str, file: str, cls: str, desc: str, paper_list, notes: str):
    @register_dataset(name, description=desc,
                      pyg_class=f"torch_geometric.datasets.{cls}(root, {subdir!r})",
                      raw_files=_raw(subdir, [file]), papers=tuple(paper_list), notes=notes,
                      sizes=SIZES.get(name))
    def load(ctx):
        import torch_geometric.datasets as pyg_datasets

        klass = getattr(pyg_datasets, cls)
        return _load(ctx, _source(subdir, [file], lambda r: klass(r, subdir)))

    return load


_npz("computers", "Computers", "amazon_electronics_computers.npz", "Amazon",
     "Amazon Computers co-purchase graph: bag-of-words reviews, 10 product categories", [P000],
     "Exactly PyG's data: 13,752 nodes, 491,722 edge_index columns, 767 features, 10 classes.")
_npz("photo", "Photo", "amazon_electronics_photo.npz", "Amazon",
     "Amazon Photo co-purchase graph: bag-of-words reviews, 8 product categories", [],
     "7,650 nodes, 238,162 edge_index columns, 745 features, 8 classes. Not used by specs 000-004.")
_npz("cs", "CS", "ms_academic_cs.npz", "Coauthor",
     "Coauthor CS (Microsoft Academic): author keyword counts, 15 fields of study", [],
     "18,333 nodes, 163,788 edge_index columns, 6,805 features, 15 classes. Not used by specs 000-004.")
_npz("physics", "Physics", "ms_academic_phy.npz", "Coauthor",
     "Coauthor Physics (Microsoft Academic): author keyword counts, 5 fields of study", [],
     "34,493 nodes, 495,924 edge_index columns, 8,415 features, 5 classes; dense x is ~1.2 GB. "
     "Not used by specs 000-004.")


# --- MUSAE social graphs (multi-hot features) ---------------------------------------------

@register_dataset(
    "facebook", description="Facebook page-page graph (MUSAE): 4 page categories",
    pyg_class="torch_geometric.datasets.FacebookPagePage(root + '/FacebookPagePage')",
    raw_files=_raw("FacebookPagePage", ["facebook.npz"]), papers=(P000, P004), sizes=SIZES["facebook"],
    notes=("Features are the raw MUSAE multi-hot page descriptors (4,714 dims), not PyG's "
           "128-dim embeddings: accuracies will not match papers bit-for-bit. 22,470 nodes; "
           "PyG's 342,004 edge columns list the 179 self-loops twice; after coalescing "
           "edge_index has 341,825 columns (170,823 undirected edges + 179 self-loops)."))
def _facebook(ctx):
    from torch_geometric.datasets import FacebookPagePage

    return _load(ctx, _source("FacebookPagePage", ["facebook.npz"],
                              lambda r: FacebookPagePage(f"{r}/FacebookPagePage")))


def _twitch(code: str):
    subdir = f"Twitch/{code}"
    notes = ("Features are MUSAE multi-hot game ids (3,170 dims), not PyG's 128-dim embeddings. "
             "edge_index includes one self-loop per node, as PyG's files do.")
    if code == "FR":
        notes += " 6,549 nodes and 231,881 edge columns (PyG lists 6,551 / 231,883: two duplicated users)."

    @register_dataset(
        f"twitch-{code.lower()}", description=f"Twitch {code} gamer follower graph (MUSAE): mature-content label",
        pyg_class=f"torch_geometric.datasets.Twitch(root + '/Twitch', {code!r})",
        raw_files=_raw(subdir, [f"{code}.npz"]), papers=(P000,) if code == "DE" else (), notes=notes,
        sizes=SIZES[f"twitch-{code.lower()}"])
    def load(ctx):
        from torch_geometric.datasets import Twitch

        return _load(ctx, _source(subdir, [f"{code}.npz"], lambda r: Twitch(f"{r}/Twitch", code)))

    return load


for _code in TWITCH:
    _twitch(_code)


@register_dataset(
    "lastfm", description="LastFM Asia social graph (MUSAE): 18 user countries",
    pyg_class="torch_geometric.datasets.LastFMAsia(root + '/LastFMAsia')",
    raw_files=_raw("LastFMAsia", ["lastfm_asia.npz"]), papers=(),
    notes=("The shared offline copy has no features (kept under _incomplete/), so it is "
           "reported missing unless LastFMAsia/raw/lastfm_asia.npz is supplied."))
def _lastfm(ctx):
    from torch_geometric.datasets import LastFMAsia

    return _load(ctx, _source("LastFMAsia", ["lastfm_asia.npz"], lambda r: LastFMAsia(f"{r}/LastFMAsia")))


# --- German Credit (local class) ------------------------------------------------------------

@register_dataset(
    "german", description="German Credit client graph (NIFTY): good/bad customer, sensitive Gender",
    pyg_class="gnnprivacy.datasets.german.GermanCredit(root + '/German')",
    raw_files=_raw("German", ["german.csv", "german_edges.txt"]), papers=(P004,),
    notes=("1,000 nodes, 43,484 edge_index columns (21,742 undirected edges, no self-loops), "
           "y = GoodCustomer (1 -> 1, -1 -> 0). Features: all columns but the label and the "
           "constant OtherLoansAtStore; Gender kept (Female = 1; also in data.sens); "
           "features='rgnn' (default) one-hot encodes PurposeOfLoan -> 37 raw-valued features "
           "(spec 004's attribute set before its binarisation to 46); features='nifty' drops it "
           "-> 27 (NIFTY's loader). Not normalised. Spec 004's paper used the authors' "
           "semi-synthetic 955-node German graph instead, which is not available here."))
def _german(ctx, *, features: str = "rgnn"):
    from gnnprivacy._validation import check_choice
    from gnnprivacy.datasets.german import FEATURE_SETS, GermanCredit

    features = check_choice("features", features, FEATURE_SETS)
    source = _source("German", ["german.csv", "german_edges.txt"],
                     lambda r: GermanCredit(f"{r}/German-{features}", features=features),
                     cache_subdir=f"German-{features}")
    return _load(ctx, source)


# --- OGB and synthetic --------------------------------------------------------------------

@register_dataset(
    "ogbn-arxiv", description="ogbn-arxiv citation graph (OGB): 128-d word2vec features, 40 subject areas",
    pyg_class="ogb.nodeproppred.PygNodePropPredDataset('ogbn-arxiv', root)",
    raw_files=tuple(f"ogbn_arxiv/{f}" for f in (
        "raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz", "raw/node_year.csv.gz",
        "raw/num-edge-list.csv.gz", "raw/num-node-list.csv.gz", "split/time/train.csv.gz",
        "split/time/valid.csv.gz", "split/time/test.csv.gz")),
    papers=(P002,), public_split=True, requires=("ogb",),
    notes=("Needs the optional 'ogb' package. The directed citation graph is symmetrised. "
           "split='public' is OGB's time split (90,941 / 29,799 / 48,603). Untested offline."))
def _arxiv(ctx):
    from gnnprivacy.datasets.arxiv import load_arxiv

    return load_arxiv(ctx)


@register_dataset(
    "csbm", description="Contextual stochastic block model generated locally (no files)",
    pyg_class="gnnprivacy.datasets.csbm.generate_csbm", generated=True,
    notes=("Parameters (dataset kwargs): num_nodes=1000, num_classes=4, num_features=32, "
           "avg_degree=10, homophily=0.8 (expected intra-class edge fraction), "
           "feature_signal=1.0 (class-mean norm; unit Gaussian noise), graph_seed=0 (the graph; "
           "load_dataset's seed only drives the split). Undirected, no self-loops, isolated "
           "nodes possible."))
def _csbm(ctx, *, num_nodes: int = 1000, num_classes: int = 4, num_features: int = 32,
          avg_degree: float = 10.0, homophily: float = 0.8, feature_signal: float = 1.0,
          graph_seed: int = 0):
    from gnnprivacy.datasets.csbm import generate_csbm

    return generate_csbm(num_nodes=num_nodes, num_classes=num_classes, num_features=num_features,
                         avg_degree=avg_degree, homophily=homophily,
                         feature_signal=feature_signal, seed=graph_seed)

from gnnprivacy.datasets import stream  # noqa: E402,F401  (registers csbm-large)

from gnnprivacy.datasets import tu_merged  # noqa: E402,F401  (registers enzymes, aids)
