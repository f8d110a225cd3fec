"""Neural-network building blocks: GNN encoders (GCN, GraphSAGE, GIN, GAT) and an MLP."""

from gnnprivacy.nn.encoders import (ACTIVATIONS, SPARSE_INPUT_ENCODERS, Encoder, build_encoder,
                                    list_encoders)

__all__ = ["ACTIVATIONS", "SPARSE_INPUT_ENCODERS", "Encoder", "build_encoder", "list_encoders"]
