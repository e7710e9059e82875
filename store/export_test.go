package store

// CountsSQL lets tests look at the plan of the count query.
const CountsSQL = countsSQL
