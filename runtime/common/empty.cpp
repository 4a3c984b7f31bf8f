// Placeholder so a component without sources yet still forms a library.
