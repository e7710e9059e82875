// Package atom reads and writes the Atom XML documents of the Service Bus management API: entity
// descriptions wrapped in entries, feeds, and the error body.
//
// Decoding is lenient because every SDK writes these documents differently (prefixes, namespace
// placement, read-only elements echoed back, element order); see protocol.md §4.3 and §8.
// Encoding is strict: it writes exactly what the real service writes, in its element order,
// because several clients throw on anything else. Encoding appends to byte slices rather than
// using xml.Marshal, since it runs on every management GET.
package atom
