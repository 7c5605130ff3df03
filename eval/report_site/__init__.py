"""The static report site (`duplex-eval report`): see site.py for its layout."""
