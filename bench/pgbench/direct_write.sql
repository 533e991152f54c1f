-- direct write: UPDATE by key sent straight to database "direct".
\set n random(1, 100000)
UPDATE users SET visits = visits + 1 WHERE id = :n;
