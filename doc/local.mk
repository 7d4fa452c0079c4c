## doc
