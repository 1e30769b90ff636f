/**
 * The graph's vocabulary and bounds, apart from terms.ts (which needs the RDF library): what the
 * tools' schemas and descriptions say is known without loading it.
 */
export const MAX_IRI_CHARS = 2_000;
export const MAX_LITERAL_CHARS = 8_000;
export const GENID_PREFIX = "urn:arbor:genid:";

/** Prefixed names a model may use (expanded on input, and used to shorten IRIs in results). */
export const PREFIXES: Readonly<Record<string, string>> = {
  rdf: "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
  rdfs: "http://www.w3.org/2000/01/rdf-schema#",
  xsd: "http://www.w3.org/2001/XMLSchema#",
  owl: "http://www.w3.org/2002/07/owl#",
  schema: "https://schema.org/",
  foaf: "http://xmlns.com/foaf/0.1/",
  dcterms: "http://purl.org/dc/terms/",
  skos: "http://www.w3.org/2004/02/skos/core#",
  prov: "http://www.w3.org/ns/prov#",
};
